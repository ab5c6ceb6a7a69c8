//! One datapath choice and one launcher for every server (`docs/cores.md`).
//!
//! A [`Launch`] says where a server runs: the [`Transport`] (`--datapath socket | tcp | xdp |
//! mlx5 | ice`, parsed once by [`Transport::from_args`]; kernel TCP's own flags by
//! [`TcpSpec::from_args`], for clients and benches too), the address, the number of cores and the
//! memory the handler needs. [`launch`] opens the datapath on each core (core *i* on the base
//! port plus *i*), builds the core's handler there with the app's [`Make`], prints one ready
//! line per core, polls with that datapath's idle policy ([`crate::idle`]) until `stop`, prints
//! each core's counters and returns their sum ([`crate::ready`]). The NIC arms dispatch to
//! [`crate::nic`] (which owns the choice of NIC crate and the "needs the feature" errors). A new
//! transport is one new variant of [`Transport`] and one arm in [`launch`].

use std::fmt;
use std::marker::PhantomData;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cli_args::Args;
use cornflakes::Datapath;
use datapath_socket::SocketConfig;
use datapath_tcp::{TcpConfig, ZeroCopy, ZeroCopyMode};

use percore::CoresConfig;

use crate::nic::{CargoRun, NicApp, NicCoreApp, NicSpec};
use crate::ready::print_ready;
use crate::{CoreId, Handler, Make, Server, ServerStats};

/// AF_XDP on one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpSpec {
    /// The interface (`--ifname`).
    pub ifname: String,
    /// A static ARP entry for the peer (`--peer IP=MAC`), so the first replies need not wait
    /// for address resolution.
    pub peer: Option<(Ipv4Addr, [u8; 6])>,
    /// The IP MTU when given explicitly (`--mtu`); `None`: the interface's.
    pub mtu: Option<usize>,
    /// The UMEM (pinned memory) size, when the handler needs more than the default (a store, an
    /// array).
    pub umem_bytes: Option<usize>,
}

/// Linux kernel TCP's own settings (`--datapath tcp`), the same for every command that opens a
/// TCP datapath — servers, clients and benches: which sends are zero-copy, `--tcp-zc MODE`
/// (`msg-zerocopy`, the default; `io-uring`; `off`) and `--tcp-zc-threshold BYTES` (the
/// least zero-copy field that makes a send zero-copy, 16384 by default; docs/tcp.md,
/// "Zero-copy sends").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSpec {
    /// Which sends are zero-copy, and how.
    pub zero_copy: ZeroCopy,
}

impl TcpSpec {
    /// The flags, for usage texts.
    pub const FLAGS: &'static str =
        "[--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]";

    /// Takes `--tcp-zc MODE` and `--tcp-zc-threshold BYTES` from `a`: the settings, or `None`
    /// when neither is given (the defaults apply). A threshold with `--tcp-zc off` is an error.
    pub fn from_args(a: &mut Args) -> Result<Option<TcpSpec>, String> {
        let mode = a.parse::<ZeroCopyMode>("--tcp-zc")?;
        let threshold = a.parse::<usize>("--tcp-zc-threshold")?;
        if mode == Some(ZeroCopyMode::Off) && threshold.is_some() {
            return Err("--tcp-zc-threshold goes with a zero-copy mode, not --tcp-zc off".into());
        }
        let zero_copy = match (mode, threshold) {
            (None, None) => return Ok(None),
            (Some(ZeroCopyMode::Off), _) => ZeroCopy::OFF,
            (mode, threshold) => {
                let d = ZeroCopy::default();
                ZeroCopy {
                    mode: mode.unwrap_or(d.mode),
                    threshold: threshold.unwrap_or(d.threshold),
                }
            }
        };
        Ok(Some(TcpSpec { zero_copy }))
    }

    /// [`Self::from_args`] for a command whose datapath is kernel TCP only when `tcp`: the
    /// settings (the defaults without the flags), or an error when they are given with
    /// another datapath.
    pub fn for_datapath(a: &mut Args, tcp: bool) -> Result<TcpSpec, String> {
        match Self::from_args(a)? {
            Some(_) if !tcp => {
                Err("--tcp-zc and --tcp-zc-threshold go with --datapath tcp".to_owned())
            }
            spec => Ok(spec.unwrap_or_default()),
        }
    }

    /// A TCP datapath's configuration with these settings, listening on `listen` (or none).
    pub fn config(&self, listen: Option<SocketAddrV4>) -> TcpConfig {
        let mut c = TcpConfig::new(listen);
        c.zero_copy = self.zero_copy;
        c
    }
}

impl fmt::Display for TcpSpec {
    /// `zero-copy msg-zerocopy for fields of 16384 B and more`, or `zero-copy off`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zero-copy {}", self.zero_copy)
    }
}

/// Where a server's packets go: the datapath of `--datapath`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Kernel UDP sockets (`datapath-socket`): unprivileged, the default.
    Socket,
    /// AF_XDP (`datapath-xdp`, feature `xdp`, root).
    Xdp(XdpSpec),
    /// A kernel-bypass NIC ([`crate::nic`]: ConnectX with feature `mlx5`, DPDK with `ice`).
    Nic(NicSpec),
    /// Linux kernel TCP (`datapath-tcp`): unprivileged; a client connection is a TCP
    /// connection, messages are length-delimited frames (docs/tcp.md).
    Tcp(TcpSpec),
}

impl Transport {
    /// The `--datapath` values a server takes.
    pub const NAMES: &'static str = "socket, tcp, xdp, mlx5 or ice";

    /// Takes `--datapath` (default `socket`) and the flags its transport needs from `a`:
    /// `--ifname IF [--peer IP=MAC]` for `xdp`, `--mlx5-dev DEV` for `mlx5`, `--dpdk-args
    /// ARGS` for `ice`, [`TcpSpec`]'s (optional) for `tcp`. An explicit `--mtu` is the app's (it
    /// applies to every transport).
    pub fn from_args(a: &mut Args) -> Result<Transport, String> {
        let datapath = a.take("--datapath")?;
        let ifname = a.take("--ifname")?;
        let peer = a.take("--peer")?;
        let mlx5_dev = a.take("--mlx5-dev")?;
        let dpdk_args = a.take("--dpdk-args")?;
        let name = datapath.as_deref().unwrap_or("socket");
        let tcp = TcpSpec::for_datapath(a, name == "tcp")?;
        Ok(match name {
            "socket" => Transport::Socket,
            "tcp" => Transport::Tcp(tcp),
            "xdp" => Transport::Xdp(XdpSpec {
                ifname: ifname.ok_or("--datapath xdp needs --ifname IF")?,
                peer: peer
                    .map(|p| netns_harness::host::parse_peer(&p))
                    .transpose()?,
                mtu: None,
                umem_bytes: None,
            }),
            "mlx5" => Transport::Nic(NicSpec::Mlx5 {
                device: mlx5_dev
                    .ok_or("--datapath mlx5 needs --mlx5-dev <mlx5_N | PCI address>")?,
            }),
            "ice" => Transport::Nic(NicSpec::Ice {
                dpdk_args: dpdk_args
                    .ok_or("--datapath ice needs --dpdk-args \"<EAL arguments>\"")?,
            }),
            other => return Err(format!("unknown datapath {other:?} ({})", Transport::NAMES)),
        })
    }

    /// The `--datapath` value.
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Socket => "socket",
            Transport::Tcp(_) => "tcp",
            Transport::Xdp(_) => "xdp",
            Transport::Nic(nic) => nic.feature(),
        }
    }
}

/// Everything [`launch`] needs besides the handler.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The datapath.
    pub transport: Transport,
    /// Core 0's address and the socket settings (bind, IP MTU, pinned memory, message size).
    /// The socket datapath uses all of it; the others the address and the MTU (AF_XDP only an
    /// explicit [`XdpSpec::mtu`]).
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
    /// How to build the app with a feature, for the error of a build without it.
    pub cargo_run: CargoRun,
}

impl Launch {
    /// `transport` at `socket.bind`, one core, reporting every second.
    pub fn new(
        transport: Transport,
        socket: SocketConfig,
        label: &str,
        cargo_run: CargoRun,
    ) -> Launch {
        Launch {
            transport,
            socket,
            cores: 1,
            spin: false,
            report: Some(Duration::from_secs(1)),
            label: label.to_owned(),
            name: format!("server-{label}"),
            min_item: 0,
            extra_bytes: 0,
            cargo_run,
        }
    }

    fn cores_config(&self) -> CoresConfig {
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
    match &l.transport {
        Transport::Socket => {
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
        Transport::Xdp(x) => xdp::launch(l, x, make, stop),
        Transport::Tcp(spec) => tcp::launch(l, spec, make, stop),
        Transport::Nic(nic) => {
            let app = OnNic {
                make,
                handler: PhantomData,
                label: l.label.clone(),
                min_item: l.min_item,
                extra_bytes: l.extra_bytes,
                cargo_run: l.cargo_run,
            };
            let (bind, mtu) = (l.socket.bind, l.socket.mtu);
            if l.cores == 1 {
                crate::nic::serve(nic, bind, mtu, app, stop, l.report)
            } else {
                crate::nic::serve_cores(nic, bind, mtu, &l.cores_config(), app, stop, l.report)
            }
        }
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
        nic: &NicSpec,
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
        spec: &TcpSpec,
        make: F,
        stop: &AtomicBool,
    ) -> Result<ServerStats<H::Counters>, String> {
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

#[cfg(not(feature = "xdp"))]
pub(crate) use xdp::xdp_needs_feature;
#[cfg(feature = "xdp")]
pub(crate) use xdp::{open_xdp_queue, xdp_config, xdp_program};

#[cfg(feature = "xdp")]
mod xdp {
    use super::*;
    use cornflakes::datapath::{DatapathMemory as _, Transmit as _};
    use cornflakes_stack::wire::MacAddr;
    use datapath_xdp::bpf::{SharedProgram, XdpProgram};
    use datapath_xdp::{XdpConfig, XdpDatapath};

    /// The AF_XDP configuration of `l`'s cores on `x` (core 0's; [`open_xdp_queue`] sets each
    /// core's address and queue).
    pub(crate) fn xdp_config(l: &Launch, x: &XdpSpec) -> XdpConfig {
        let mut cfg = XdpConfig::new(&x.ifname, l.socket.bind);
        cfg.static_arp
            .extend(x.peer.map(|(ip, mac)| (ip, MacAddr(mac))));
        cfg.mtu = x.mtu;
        if let Some(b) = x.umem_bytes {
            cfg.umem_bytes = b;
        }
        cfg
    }

    /// With more than one core, the XDP program redirecting port `bind + i` to queue *i*
    /// (attached until the first value is dropped; the second is what each core's socket
    /// joins). One core: none (the socket attaches its own).
    pub(crate) fn xdp_program(
        x: &XdpSpec,
        bind: SocketAddrV4,
        cores: usize,
    ) -> Result<(Option<XdpProgram>, Option<SharedProgram>), String> {
        let ifname = &x.ifname;
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

    /// Core `core`'s AF_XDP socket: queue `core` at `bind`'s port plus `core`.
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
        x: &XdpSpec,
        make: F,
        stop: &AtomicBool,
    ) -> Result<ServerStats<H::Counters>, String> {
        let base = xdp_config(l, x);
        let (ifname, bind) = (x.ifname.clone(), l.socket.bind);
        // With several cores, the program stays attached (on this thread) until every core
        // has stopped.
        let (prog, shared) = xdp_program(x, bind, l.cores)?;
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

    /// The error of choosing AF_XDP in a build without it.
    pub(crate) fn xdp_needs_feature(l: &Launch) -> String {
        format!(
            "--datapath xdp needs the `xdp` feature (clang and libbpf-dev: apt-get install -y \
             $(cat crates/datapath-xdp/APT_PACKAGES)): {}",
            l.cargo_run.command("xdp")
        )
    }

    /// The error of a build without AF_XDP.
    pub(super) fn launch<H: Handler, F: Make<H>>(
        l: &Launch,
        _: &XdpSpec,
        _: F,
        _: &AtomicBool,
    ) -> Result<ServerStats<H::Counters>, String> {
        Err(xdp_needs_feature(l))
    }
}
