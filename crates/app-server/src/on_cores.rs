//! N cores, each with its own datapath on the [`DatapathSpec`] a [`Launch`] names, running any
//! body generic over [`Datapath`]: how a load generator gets its client cores on AF_XDP, a
//! ConnectX or a DPDK port (`echo client`, `kv client` with `--datapath xdp | mlx5 | ice`).
//!
//! Core *i* opens its datapath on its own (pinned, with more than one core) thread at
//! `l.socket.bind`'s address and port plus *i* — the same layout as a server's cores, so a
//! NIC's per-core flow rules steer each client core's replies (to its own port) to its own
//! queue. The datapath never leaves that thread; the body runs there until it returns. One
//! core, and each core of kernel UDP sockets, is opened by `datapath-open`'s opener
//! ([`DatapathSpec::open`]); N cores of a NIC by [`crate::nic::spawn_on_queues`]; N AF_XDP
//! queues behind one XDP program as the server launcher opens them.

use std::net::SocketAddrV4;

use cornflakes::Datapath;
use datapath_open::{DatapathKind, DatapathSpec, OnDatapath, Open};
use percore::QueueInfo;

use crate::launch::Launch;

/// What runs on each core of [`spawn_on_cores`]: generic over the datapath, so one body serves
/// every datapath.
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
    program: Option<datapath_open::datapath_xdp::bpf::XdpProgram>,
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

/// Opens `l.cores` datapaths on `l.spec`, core *i* at `l.socket.bind`'s port plus *i* (port 0
/// stays 0: the kernel picks one per socket), with `l`'s memory, as a client (`listen` off, as
/// in [`Open::client`]), and runs `app` on each, on its own thread (pinned with several
/// cores). Kernel UDP: a socket per core; AF_XDP: queue *i* of the interface, behind one program
/// steering port plus *i* to queue *i* when there are several; mlx5 and ice: a queue set of the
/// port per core ([`crate::nic::spawn_on_queues`]). Returns when every core is ready. Kernel TCP
/// is not offered here: its clients connect through `bench_client::tcp_conns`.
pub fn spawn_on_cores<A: OnCore>(l: &Launch, app: A) -> Result<OnCores<A::Out>, String> {
    if l.cores == 0 {
        return Err("at least one core is needed".to_owned());
    }
    let cc = l.cores_config();
    let at = Open {
        listen: false,
        ..l.open()
    };
    let done = |cores| OnCores {
        cores,
        #[cfg(feature = "xdp")]
        program: None,
    };
    match l.spec.kind {
        DatapathKind::Tcp => Err(
            "kernel TCP cores are not opened here: a TCP client connects with bench_client::tcp_conns"
                .to_owned(),
        ),
        DatapathKind::Xdp if l.cores > 1 => xdp::spawn(l, &cc, app),
        DatapathKind::Mlx5 | DatapathKind::Ice if l.cores > 1 => {
            Ok(done(crate::nic::spawn_on_queues(&l.spec, &at, &cc, app)?))
        }
        // One core of any datapath, or a socket per core: the opener, on the core's thread.
        _ => {
            let spec = l.spec.clone();
            let cores = percore::Cores::spawn(&cc, move |core, ready| {
                let mut at = at.clone();
                at.socket.bind = core_addr(at.bind(), core.index())?;
                let on = Opened {
                    app: &app,
                    core: &core,
                    ready,
                };
                spec.open(&at, on)
            })?;
            Ok(done(cores))
        }
    }
}

/// An [`OnCore`] body on the datapath the opener opened on its core's thread.
struct Opened<'c, A> {
    app: &'c A,
    core: &'c percore::Core,
    ready: percore::Ready<QueueInfo>,
}

impl<A: OnCore> OnDatapath for Opened<'_, A> {
    type Out = A::Out;

    fn on<D: Datapath + 'static>(self, dp: D, spec: &DatapathSpec) -> Result<A::Out, String> {
        // Port 0 asks the kernel for one: report the one it gave.
        let addr = dp.local_addr();
        let what = format!(
            "{}, IP MTU {}",
            spec.label(),
            cornflakes::datapath::Transmit::mtu(&dp)
        );
        self.app.run(dp, self.core, self.ready, (addr, what))
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

    /// AF_XDP on several cores: core *i* on queue *i* of the interface, behind one program
    /// steering port plus *i* to queue *i*, kept attached while the cores run.
    pub(super) fn spawn<A: OnCore>(
        l: &Launch,
        cc: &percore::CoresConfig,
        app: A,
    ) -> Result<OnCores<A::Out>, String> {
        let bind = l.socket.bind;
        let (program, shared) = crate::launch::xdp_program(&l.spec.device, bind, l.cores)?;
        let base = datapath_open::xdp_config(&l.spec, bind, l.umem_bytes);
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

    /// The error of a build without AF_XDP.
    pub(super) fn spawn<A: OnCore>(
        l: &Launch,
        _: &percore::CoresConfig,
        _: A,
    ) -> Result<OnCores<A::Out>, String> {
        Err(datapath_open::needs_feature(
            DatapathKind::Xdp,
            &l.cargo_run,
        ))
    }
}
