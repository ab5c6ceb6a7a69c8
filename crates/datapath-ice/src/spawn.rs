//! Several server cores on one DPDK port from an application's command line
//! (`--dpdk-args "..." --bind IP:PORT --mtu N --cores N`): [`open_cores`] starts the EAL and
//! claims the port with one queue pair per core; [`spawn_cores`] also runs a server on each
//! core's pinned thread ([`crate::cores`] is how the cores share the port).

use std::io;
use std::net::SocketAddrV4;
use std::sync::Arc;

use crate::cores::{CorePort, Steering};
use crate::datapath::{config_from_args, IceDatapath};

/// As [`open`](crate::datapath::open), for `cores` server cores sharing the port: one RX/TX
/// queue pair each, core `i` answering at `addr`'s IP and UDP port `addr.port() + i`. Then call
/// [`CorePort::open_core`](crate::cores::CorePort::open_core)`(i)` on each core's thread (a
/// server: [`spawn_cores`] does both, on pinned threads):
///
/// ```text
/// let port = datapath_ice::spawn::open_cores(dpdk_args, bind, mtu, n)?;
/// std::thread::scope(|s| for i in 0..n {
///     let port = port.clone();
///     s.spawn(move || { let dp = port.open_core(i)?; serve(dp) });
/// });
/// ```
pub fn open_cores(
    dpdk_args: &str,
    addr: SocketAddrV4,
    mtu: usize,
    cores: usize,
) -> io::Result<Arc<CorePort>> {
    crate::cores::open_cores(config_from_args(dpdk_args, addr, mtu)?, cores)
}

/// `cc.cores` share-nothing server cores on the DPDK port `dpdk_args` name (`percore`: one
/// thread per core, pinned unless `cc.pin` is off), one RX/TX queue pair each: chooses the
/// cores' CPUs (before the EAL pins this thread to its main lcore), [`open_cores`] here, then
/// on core *i*'s own thread [`CorePort::open_core`](crate::cores::CorePort::open_core)`(i)`
/// and `serve(dp, core, ready, info)`, where `info` is what the core reports once set up: its
/// address ([`percore::core_addr`]: `base`'s port plus *i*) and `DPDK {dpdk_args}, queue pair
/// {i}`. `serve` builds the core's server on `dp`, calls `ready.ready(info)`, polls until
/// `core.stop()` and returns the core's counters.
///
/// Returns when every core is ready, with how the port steers frames to the cores' queues
/// (decided when the last core opened its queue); an error (starting DPDK, a core's queue
/// pair, or `serve`'s setup) stops the other cores and says where it happened.
pub fn spawn_cores<S, F>(
    dpdk_args: &str,
    base: SocketAddrV4,
    mtu: usize,
    cc: &percore::CoresConfig,
    serve: F,
) -> Result<(percore::Cores<percore::QueueInfo, S>, Steering), String>
where
    S: Send + 'static,
    F: Fn(
            IceDatapath,
            &percore::Core,
            percore::Ready<percore::QueueInfo>,
            percore::QueueInfo,
        ) -> Result<S, String>
        + Send
        + Sync
        + 'static,
{
    // The cores' CPUs, chosen before the EAL pins this thread to its main lcore.
    let cc = cc.clone().on_cpus(percore::cpus_for(cc.cores)?);
    // Starts the EAL, claims the port and configures one queue pair per core; each core then
    // sets up its own queue pair, memory and pools on its own thread.
    let port = open_cores(dpdk_args, base, mtu, cc.cores).map_err(|e| {
        format!(
            "starting DPDK with {dpdk_args:?} for {} cores: {e}",
            cc.cores
        )
    })?;
    let running = {
        let (port, args) = (port.clone(), dpdk_args.to_owned());
        percore::Cores::spawn(&cc, move |core, ready| {
            let i = core.index();
            let addr = percore::core_addr(base, i)?;
            let dp = port
                .open_core(i)
                .map_err(|e| format!("DPDK queue pair {i}: {e}"))?;
            let what = format!("DPDK {args}, queue pair {i}");
            serve(dp, &core, ready, (addr, what))
        })?
    };
    Ok((running, port.steering()))
}
