//! One launcher for every server (`docs/cores.md`).
//!
//! A [`Launch`] says where a server runs: the datapath (a [`DatapathSpec`], `--datapath socket
//! | tcp | xdp | mlx5 | ice` read once by [`DatapathSpec::from_args`] in `datapath-open`), the
//! address, the number of cores and the memory the handler needs. [`launch`] opens the
//! datapath on each core (core *i* on the base port plus *i*), builds the core's handler there
//! with the app's [`Make`], prints one ready line per core, polls with that datapath's idle
//! policy ([`crate::idle`]) until `stop`, prints each core's counters and returns their sum
//! ([`crate::ready`]). One core on a NIC is opened by `datapath-open`'s opener; N cores by the
//! NIC crates' spawners ([`crate::nic`]).

use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cornflakes::Datapath;
use datapath_open::{DatapathKind, DatapathSpec, Open};
use datapath_socket::SocketConfig;

use percore::CoresConfig;

use crate::nic::{CargoRun, NicApp, NicCoreApp};
use crate::ready::print_ready;
use crate::{CoreId, Handler, Make, Server, ServerStats};

/// Everything [`launch`] needs besides the handler.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The datapath.
    pub spec: DatapathSpec,
    /// Core 0's address and the socket settings (bind, IP MTU, pinned memory, message size).
    /// The socket datapath uses all of it; the others the address and the MTU (the spec's
    /// MTU when it has one; AF_XDP only an explicit one).
    pub socket: SocketConfig,
    /// Server cores (core *i* on the base port plus *i*); one core floats, several are pinned
    /// one per CPU.
    pub cores: usize,
    /// Socket datapath: busy-poll when idle instead of blocking on the socket.
    pub spin: bool,
    /// Print each core's counters this often.
    pub report: Option<Duration>,
    /// What the cores serve, for the ready lines (`[server] ready: {label} on …`).
    pub label: String,
    /// Thread names are `{name}-{i}`.
    pub name: String,
    /// NICs: the largest item the handler sends from its own pinned memory (0: packet buffers
    /// only; ConnectX registers pools for it).
    pub min_item: usize,
    /// NICs: pinned memory the handler allocates beyond packet buffers (ConnectX sizes its
    /// memory for it).
    pub extra_bytes: usize,
    /// AF_XDP: the UMEM (pinned memory) size, when the handler needs more than the default (a
    /// store, an array).
    pub umem_bytes: Option<usize>,
    /// How to build the app with a feature, for the error of a build without it.
    pub cargo_run: CargoRun,
}

impl Launch {
    /// `spec` at `socket.bind`, one core, reporting every second. The spec's MTU, when it has
    /// one, is the socket's.
    pub fn new(
        spec: DatapathSpec,
        mut socket: SocketConfig,
        label: &str,
        cargo_run: CargoRun,
    ) -> Launch {
        socket.mtu = spec.mtu_or(socket.mtu);
        Launch {
            spec,
            socket,
            cores: 1,
            spin: false,
            report: Some(Duration::from_secs(1)),
            label: label.to_owned(),
            name: format!("server-{label}"),
            min_item: 0,
            extra_bytes: 0,
            umem_bytes: None,
            cargo_run,
        }
    }

    /// How the opener opens one core's datapath.
    pub(crate) fn open(&self) -> Open {
        Open {
            socket: self.socket.clone(),
            listen: true,
            min_item: self.min_item,
            extra_bytes: self.extra_bytes,
            umem_bytes: self.umem_bytes,
            cargo_run: self.cargo_run,
        }
    }

    /// The cores' threads: named `{name}-{i}`, pinned when there are several.
    pub(crate) fn cores_config(&self) -> CoresConfig {
        let mut cc = CoresConfig::new(&self.name, self.cores);
        cc.pin = self.cores > 1;
        cc
    }
}

/// Runs the handler `make` builds on each core of `l` until `stop` is set; prints each core's
/// ready line (`[server] ready: {label} on {addr} ({datapath}, core i of N)`), and with more
/// than one core each core's counters at the end; returns the counters summed over the cores.
pub fn launch<H, F>(
    l: &Launch,
    make: F,
    stop: &AtomicBool,
) -> Result<ServerStats<H::Counters>, String>
where
    H: Handler + 'static,
    F: Make<H>,
{
    if l.cores == 0 {
        return Err("--cores 0: a server needs at least one core".to_owned());
    }
    match l.spec.kind {
        DatapathKind::Socket => {
            let cc = l.cores_config();
            let flag = Arc::new(AtomicBool::new(false));
            let running = crate::socket::spawn_socket_cores(
                l.socket.clone(),
                &cc,
                flag,
                l.spin,
                l.report,
                make,
            )?;
            crate::ready::serve_until(running, &l.label, stop, |r| {
                (r.0, "socket datapath".to_owned())
            })
        }
        DatapathKind::Xdp => xdp::launch(l, make, stop),
        DatapathKind::Tcp => tcp::launch(l, make, stop),
        DatapathKind::Mlx5 | DatapathKind::Ice => {
            let app = OnNic {
                make,
                handler: PhantomData,
                label: l.label.clone(),
                min_item: l.min_item,
                extra_bytes: l.extra_bytes,
                cargo_run: l.cargo_run,
            };
            if l.cores == 1 {
                crate::nic::serve(&l.spec, &l.open(), app, stop, l.report)
            } else {
                let (bind, mtu) = (l.socket.bind, l.socket.mtu);
                crate::nic::serve_cores(&l.spec, bind, mtu, &l.cores_config(), app, stop, l.report)
            }
        }
        DatapathKind::Emu => Err(
            "--datapath emu is a bench's own device (`echo bench`, `kv bench`, `calibrate run`), \
             not a server's"
                .to_owned(),
        ),
    }
}

/// A handler on a NIC's queues, as [`crate::nic`] runs servers.
struct OnNic<H, F> {
    make: F,
    handler: PhantomData<fn() -> H>,
    label: String,
    min_item: usize,
    extra_bytes: usize,
    cargo_run: CargoRun,
}

impl<H: Handler, F: Make<H>> OnNic<H, F> {
    fn serve<D: Datapath>(
        &self,
        dp: D,
        core: CoreId,
        stop: &AtomicBool,
        report: Option<Duration>,
        ready: impl FnOnce(),
    ) -> Result<ServerStats<H::Counters>, String> {
        let handler = (self.make)(dp.memory(), core)?;
        let mut server = Server::new(dp, handler);
        ready();
        server.run(
            stop,
            report,
            crate::idle::IDLE_SPINS,
            &mut crate::idle::yield_idle,
        );
        Ok(server.stats())
    }
}

impl<H: Handler + 'static, F: Make<H>> NicApp for OnNic<H, F> {
    type Stats = ServerStats<H::Counters>;

    fn cargo_run(&self) -> CargoRun {
        self.cargo_run
    }

    fn min_item(&self) -> usize {
        self.min_item
    }

    fn extra_bytes(&self) -> usize {
        self.extra_bytes
    }

    fn serve<D: Datapath>(
        self,
        dp: D,
        nic: &DatapathSpec,
        bind: SocketAddrV4,
        stop: &AtomicBool,
        report: Option<Duration>,
    ) -> Result<Self::Stats, String> {
        OnNic::serve(&self, dp, CoreId::ONE, stop, report, || {
            print_ready(&self.label, &[(bind, nic.label())])
        })
    }
}

impl<H: Handler + 'static, F: Make<H>> NicCoreApp for OnNic<H, F> {
    type Stats = ServerStats<H::Counters>;

    fn cargo_run(&self) -> CargoRun {
        self.cargo_run
    }

    fn label(&self) -> String {
        self.label.clone()
    }

    fn min_item(&self) -> usize {
        self.min_item
    }

    fn extra_bytes(&self) -> usize {
        self.extra_bytes
    }

    fn serve_core<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<percore::QueueInfo>,
        info: percore::QueueInfo,
        report: Option<Duration>,
    ) -> Result<Self::Stats, String> {
        self.serve(dp, CoreId::of(core), core.stop(), report, || {
            ready.ready(info)
        })
    }
}

impl<H, F> fmt::Debug for OnNic<H, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnNic").field("label", &self.label).finish()
    }
}

mod tcp {
    use super::*;

    /// Kernel TCP: core *i* listens on the base port plus *i* with its own
    /// [`datapath_tcp::TcpDatapath`] on its own thread ([`crate::socket::spawn_tcp_cores`]);
    /// the ready lines say which sends are zero-copy.
    pub(super) fn launch<H: Handler, F: Make<H>>(
        l: &Launch,
        make: F,
        stop: &AtomicBool,
    ) -> Result<ServerStats<H::Counters>, String> {
        let spec = &l.spec.tcp;
        let running = crate::socket::spawn_tcp_cores(
            &l.socket,
            spec,
            &l.cores_config(),
            Arc::new(AtomicBool::new(false)),
            l.spin,
            l.report,
            make,
        )?;
        crate::ready::serve_until(running, &l.label, stop, |r| {
            (r.0, format!("kernel TCP, {spec}"))
        })
    }
}

#[cfg(feature = "xdp")]
pub(crate) use xdp::{open_xdp_queue, xdp_program};

#[cfg(feature = "xdp")]
mod xdp {
    use super::*;
    use cornflakes::datapath::{DatapathMemory as _, Transmit as _};
    use datapath_open::datapath_xdp::bpf::{SharedProgram, XdpProgram};
    use datapath_open::datapath_xdp::{XdpConfig, XdpDatapath};

    /// With more than one core, the XDP program on `ifname` redirecting port `bind + i` to
    /// queue *i* (attached until the first value is dropped; the second is what each core's
    /// socket joins). One core: none (the socket attaches its own).
    pub(crate) fn xdp_program(
        ifname: &str,
        bind: SocketAddrV4,
        cores: usize,
    ) -> Result<(Option<XdpProgram>, Option<SharedProgram>), String> {
        let n = u16::try_from(cores).map_err(|_| format!("--cores {cores}: too many"))?;
        let prog = if n > 1 {
            Some(
                XdpProgram::for_cores(ifname, bind.port(), n)
                    .map_err(|e| format!("AF_XDP on {ifname}: {e}"))?,
            )
        } else {
            None
        };
        let shared = prog
            .as_ref()
            .map(|p| p.share())
            .transpose()
            .map_err(|e| format!("sharing the XDP program on {ifname}: {e}"))?;
        Ok((prog, shared))
    }

    /// Core `core`'s AF_XDP socket on `base` (core 0's configuration,
    /// [`datapath_open::xdp_config`]): queue `core` at `bind`'s port plus `core`, joined to
    /// `shared` when several cores share one program.
    pub(crate) fn open_xdp_queue(
        base: &XdpConfig,
        shared: &Option<SharedProgram>,
        bind: SocketAddrV4,
        core: usize,
    ) -> Result<(SocketAddrV4, XdpDatapath), String> {
        let addr = percore::core_addr(bind, core)?;
        let mut xc = base.clone();
        xc.addr = addr;
        xc.queue = core as u32;
        xc.program = shared.clone();
        let dp = XdpDatapath::new(xc)
            .map_err(|e| format!("AF_XDP on {} queue {core}: {e}", base.ifname))?;
        Ok((addr, dp))
    }

    /// AF_XDP: one core on the interface's queue 0, or N cores each with its own AF_XDP socket
    /// on queue *i* behind one XDP program redirecting port `bind + i` to queue *i* (the
    /// interface needs N queues and the NIC must steer each port to its queue, e.g. with
    /// `ethtool -N`; docs/xdp.md).
    pub(super) fn launch<H: Handler, F: Make<H>>(
        l: &Launch,
        make: F,
        stop: &AtomicBool,
    ) -> Result<ServerStats<H::Counters>, String> {
        let base = datapath_open::xdp_config(&l.spec, l.socket.bind, l.umem_bytes);
        let (ifname, bind) = (l.spec.device.clone(), l.socket.bind);
        // With several cores, the program stays attached (on this thread) until every core
        // has stopped.
        let (prog, shared) = xdp_program(&ifname, bind, l.cores)?;
        let report = l.report;
        let running = percore::Cores::spawn(&l.cores_config(), move |core, ready| {
            let (addr, dp) = open_xdp_queue(&base, &shared, bind, core.index())?;
            let ip_mtu = dp.mtu();
            eprintln!("[server] queue {}: IP MTU {ip_mtu}", core.index());
            let handler = make(dp.memory(), CoreId::of(&core))?;
            let mut server = Server::new(dp, handler);
            ready.ready((
                addr,
                format!(
                    "AF_XDP on {ifname}, IP MTU {ip_mtu}, queue {}",
                    core.index()
                ),
            ));
            server.run(
                core.stop(),
                report,
                crate::idle::IDLE_SPINS,
                &mut crate::idle::yield_idle,
            );
            Ok(server.stats())
        })?;
        let sum = crate::ready::serve_until(running, &l.label, stop, Clone::clone)?;
        if let Some(p) = &prog {
            if let Ok(s) = p.stats() {
                eprintln!("[server] XDP program: {s}");
            }
        }
        drop(prog);
        Ok(sum)
    }
}

#[cfg(not(feature = "xdp"))]
mod xdp {
    use super::*;

    /// The error of a build without AF_XDP.
    pub(super) fn launch<H: Handler, F: Make<H>>(
        l: &Launch,
        _: F,
        _: &AtomicBool,
    ) -> Result<ServerStats<H::Counters>, String> {
        Err(datapath_open::needs_feature(
            DatapathKind::Xdp,
            &l.cargo_run,
        ))
    }
}
