//! N cores, each with its own datapath on the transport a [`Launch`] names, running any body
//! generic over [`Datapath`]: how a load generator gets its client cores on AF_XDP, a ConnectX
//! or a DPDK port (`echo client`, `kv client` with `--datapath xdp | mlx5 | ice`).
//!
//! Core *i* opens its datapath on its own (pinned, with more than one core) thread at
//! `l.socket.bind`'s address and port plus *i* — the same layout as a server's cores, so a
//! NIC's per-core flow rules steer each client core's replies (to its own port) to its own
//! queue. The datapath never leaves that thread; the body runs there until it returns. The NIC
//! crates are chosen in [`crate::nic`], AF_XDP here.

use std::net::SocketAddrV4;

use cornflakes::Datapath;
use percore::QueueInfo;

use crate::launch::{Launch, Transport};

/// What runs on each core of [`spawn_on_cores`]: generic over the datapath, so one body serves
/// every transport.
pub trait OnCore: Send + Sync + 'static {
    /// What each core returns when its body ends.
    type Out: Send + 'static;

    /// Core `core`'s work on its own datapath `dp`, on that core's thread: sets up, calls
    /// `ready.ready(info)` (info: its address and a description of its queue), works, returns.
    fn run<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<QueueInfo>,
        info: QueueInfo,
    ) -> Result<Self::Out, String>;
}

/// Cores started by [`spawn_on_cores`], each running its body; what keeps their datapaths
/// working (an XDP program with several cores) lives as long as this.
pub struct OnCores<O> {
    cores: percore::Cores<QueueInfo, O>,
    #[cfg(feature = "xdp")]
    program: Option<datapath_xdp::bpf::XdpProgram>,
}

impl<O: Send + 'static> OnCores<O> {
    /// What each core reported when ready, by core index.
    pub fn ready(&self) -> &[QueueInfo] {
        self.cores.ready()
    }

    /// Waits for every core's body to return (bodies that end by themselves, e.g. when their
    /// work runs out), and returns what they returned, by core index.
    pub fn join(self) -> Result<Vec<O>, String> {
        let r = self.cores.join();
        #[cfg(feature = "xdp")]
        drop(self.program);
        r
    }

    /// Sets the cores' stop flag ([`percore::Core::stop`]) and joins them.
    pub fn stop(self) -> Result<Vec<O>, String> {
        self.cores
            .stop_flag()
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.join()
    }
}

/// Opens `l.cores` datapaths on `l.transport`, core *i* at `l.socket.bind`'s port plus *i*
/// (kernel UDP: a socket; AF_XDP: queue *i* of the interface, behind one program steering
/// port plus *i* to queue *i* when there are several; mlx5 and ice: a queue set of the
/// port, [`crate::nic::spawn_on_queues`]), and runs `app` on each, on its own thread (pinned
/// with several cores). Returns when every core is ready. Kernel TCP is not offered here: its
/// clients connect through `bench_client::tcp_conns`.
pub fn spawn_on_cores<A: OnCore>(l: &Launch, app: A) -> Result<OnCores<A::Out>, String> {
    if l.cores == 0 {
        return Err("at least one core is needed".to_owned());
    }
    let mut cc = percore::CoresConfig::new(&l.name, l.cores);
    cc.pin = l.cores > 1;
    let bind = l.socket.bind;
    let done = |cores| OnCores {
        cores,
        #[cfg(feature = "xdp")]
        program: None,
    };
    match &l.transport {
        Transport::Socket => {
            let base = l.socket.clone();
            let cores = percore::Cores::spawn(&cc, move |core, ready| {
                let addr = core_addr(bind, core.index())?;
                let mut sc = base.clone();
                sc.bind = addr;
                let dp = datapath_socket::SocketDatapath::new(sc)
                    .map_err(|e| format!("socket at {addr}: {e}"))?;
                // Port 0 asks the kernel for one: report the one it gave.
                let addr = cornflakes::datapath::Connect::local_addr(&dp);
                app.run(dp, &core, ready, (addr, "kernel UDP socket".to_owned()))
            })?;
            Ok(done(cores))
        }
        Transport::Tcp(_) => Err(
            "kernel TCP cores are not opened here: a TCP client connects with bench_client::tcp_conns"
                .to_owned(),
        ),
        Transport::Xdp(x) => xdp::spawn(l, x, &cc, app),
        Transport::Nic(nic) => {
            let q = crate::nic::Queues {
                bind,
                mtu: l.socket.mtu,
                min_item: l.min_item,
                extra_bytes: l.extra_bytes,
                cargo_run: l.cargo_run,
                role: "client",
            };
            Ok(done(crate::nic::spawn_on_queues(nic, &q, &cc, app)?))
        }
    }
}

/// Core `i`'s address: `base` with its port plus `i` (port 0 stays 0: the kernel picks).
fn core_addr(base: SocketAddrV4, i: usize) -> Result<SocketAddrV4, String> {
    if base.port() == 0 {
        return Ok(base);
    }
    percore::core_addr(base, i)
}

#[cfg(feature = "xdp")]
mod xdp {
    use super::*;
    use crate::launch::XdpSpec;

    /// AF_XDP: core *i* on queue *i* of the interface; with several cores, one program
    /// steering port plus *i* to queue *i*, kept attached while the cores run.
    pub(super) fn spawn<A: OnCore>(
        l: &Launch,
        x: &XdpSpec,
        cc: &percore::CoresConfig,
        app: A,
    ) -> Result<OnCores<A::Out>, String> {
        let (program, shared) = crate::launch::xdp_program(x, l.socket.bind, l.cores)?;
        let base = crate::launch::xdp_config(l, x);
        let bind = l.socket.bind;
        let cores = percore::Cores::spawn(cc, move |core, ready| {
            let (addr, dp) = crate::launch::open_xdp_queue(&base, &shared, bind, core.index())?;
            let what = format!(
                "AF_XDP on {}, IP MTU {}, queue {}",
                base.ifname,
                cornflakes::datapath::Transmit::mtu(&dp),
                core.index()
            );
            app.run(dp, &core, ready, (addr, what))
        })?;
        Ok(OnCores { cores, program })
    }
}

#[cfg(not(feature = "xdp"))]
mod xdp {
    use super::*;
    use crate::launch::XdpSpec;

    /// The error of a build without AF_XDP.
    pub(super) fn spawn<A: OnCore>(
        l: &Launch,
        _: &XdpSpec,
        _: &percore::CoresConfig,
        _: A,
    ) -> Result<OnCores<A::Out>, String> {
        Err(crate::launch::xdp_needs_feature(l))
    }
}
