//! N share-nothing server cores over kernel sockets, UDP or TCP (`docs/cores.md`): core *i*
//! binds its own socket on the base port plus *i* (one port per core), so a client picks the core — and, for
//! the KV store, the shard — by the destination port. `SO_REUSEPORT` (one port, the kernel
//! hashing each flow to a socket) would spread clients over the cores too, but by a hash the
//! client does not control, so key steering would be impossible; the servers use one port per
//! core.
//!
//! Each core opens its own [`SocketDatapath`] (socket, pinned memory, connection table) or
//! [`TcpDatapath`] (listening socket, epoll instance, pinned memory, connections) on its own
//! thread ([`percore::Cores`]), builds its handler there, and polls with the socket idle
//! policy ([`crate::idle::socket_idle`]; TCP: waiting in `epoll_wait`).

use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cornflakes::datapath::{Connect as _, DatapathMemory as _, Transmit as _};
use datapath_socket::{SocketConfig, SocketDatapath};
use datapath_tcp::TcpDatapath;
use percore::{Cores, CoresConfig};

use crate::{AppCounters, CoreId, Handler, Make, Server, ServerStats, TcpSpec};

/// Running socket server cores: each reported its address and its descriptor limit.
pub(crate) type SocketCores<A> = Cores<(SocketAddrV4, usize), ServerStats<A>>;

/// Starts `cores.cores` server cores. Core *i* binds `sock.bind` with the port plus *i*
/// ([`percore::core_addr`]; port 0: each core an ephemeral port), builds its handler with
/// `make` (on the core's own thread) and reports its address and descriptor limit when ready. Each core then polls
/// until `stop` is set — blocking briefly on its socket when idle, or yielding when `spin` —
/// printing its counters every `report` — and returns its counters.
pub(crate) fn spawn_socket_cores<H: Handler, F: Make<H>>(
    sock: SocketConfig,
    cores: &CoresConfig,
    stop: Arc<AtomicBool>,
    spin: bool,
    report: Option<Duration>,
    make: F,
) -> Result<SocketCores<H::Counters>, String> {
    Cores::spawn_with_stop(cores, stop, move |core, ready| {
        let mut sc = sock.clone();
        sc.bind = percore::core_addr(sock.bind, core.index())?;
        let bind = sc.bind;
        let dp = SocketDatapath::new(sc).map_err(|e| format!("binding {bind}: {e}"))?;
        let addr = dp.local_addr();
        let segments = dp.max_segments();
        let handler = make(dp.memory(), CoreId::of(&core))?;
        let mut server = Server::new(dp, handler);
        ready.ready((addr, segments));
        let (after, mut hook) = crate::idle::socket_idle(spin);
        server.run(core.stop(), report, after, &mut |dp| hook(dp));
        Ok(server.stats())
    })
}

/// Starts the kernel-TCP server cores: core *i* listens on `sock.bind`'s port plus *i* (port 0:
/// each an ephemeral port) with its own [`TcpDatapath`] (epoll instance, pinned memory,
/// connections) on its own thread, with `sock`'s pinned memory (items at least
/// [`datapath_tcp::DEFAULT_MAX_ITEM`]) and message size and `tcp`'s zero-copy sends, and reports
/// its address and the iovecs one message may use. An idle core waits in `epoll_wait` (at most
/// [`crate::idle::IDLE_WAIT`]) after [`crate::idle::SOCKET_IDLE_SPINS`] empty polls, or yields
/// with `spin`.
pub(crate) fn spawn_tcp_cores<H: Handler, F: Make<H>>(
    sock: &SocketConfig,
    tcp: &TcpSpec,
    cores: &CoresConfig,
    stop: Arc<AtomicBool>,
    spin: bool,
    report: Option<Duration>,
    make: F,
) -> Result<SocketCores<H::Counters>, String> {
    let bind = sock.bind;
    let mut base = tcp.config(Some(bind));
    base.stream.memory = sock.memory.clone();
    base.stream.memory.max_item_size = base
        .stream
        .memory
        .max_item_size
        .max(datapath_tcp::DEFAULT_MAX_ITEM);
    base.stream.max_message_len = base.stream.max_message_len.min(sock.max_message_len.max(1));
    Cores::spawn_with_stop(cores, stop, move |core, ready| {
        let addr = percore::core_addr(bind, core.index())?;
        let mut cfg = base.clone();
        cfg.stream.listen = Some(addr);
        let dp = TcpDatapath::new(cfg).map_err(|e| format!("TCP on {addr}: {e}"))?;
        let local = dp.local_addr();
        let segments = dp.max_segments();
        let handler = make(dp.memory(), CoreId::of(&core))?;
        let mut server = Server::new(dp, handler);
        ready.ready((local, segments));
        let (after, wait) = if spin {
            (crate::idle::IDLE_SPINS, None)
        } else {
            (crate::idle::SOCKET_IDLE_SPINS, Some(crate::idle::IDLE_WAIT))
        };
        server.run(
            core.stop(),
            report,
            after,
            &mut |dp: &TcpDatapath| match wait {
                Some(t) => {
                    let _ = dp.wait(t);
                }
                None => std::thread::yield_now(),
            },
        );
        Ok(server.stats())
    })
}

/// Server cores over the socket datapath, each on its own thread with its own socket
/// (core *i* on the base port plus *i*), handler and counters (`docs/cores.md`).
pub struct ServerHandle<A> {
    cores: SocketCores<A>,
}

impl<A: AppCounters> ServerHandle<A> {
    /// Starts `cores.cores` share-nothing server cores, core *i* binding `sock.bind`'s port
    /// plus *i* and serving the handler `make` builds on its thread; idle cores block briefly
    /// on their socket (or yield, with `spin`); with `report`, each prints its counters that
    /// often. Returns once every core is bound and its handler built.
    pub fn spawn<H, F>(
        sock: SocketConfig,
        cores: &CoresConfig,
        report: Option<Duration>,
        spin: bool,
        make: F,
    ) -> Result<Self, String>
    where
        H: Handler<Counters = A>,
        F: Make<H>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = spawn_socket_cores(sock, cores, stop, spin, report, make)?;
        Ok(ServerHandle { cores })
    }

    /// [`Self::spawn`] over kernel TCP ([`datapath_tcp::TcpDatapath`], the `--datapath tcp`
    /// arm) with `tcp`'s settings: core *i* listens on `sock.bind`'s port plus *i*; of `sock`
    /// the address, the pinned memory and `max_message_len` are used. [`Self::max_segments`]
    /// is then the iovecs of one message.
    pub fn spawn_tcp<H, F>(
        sock: SocketConfig,
        tcp: &TcpSpec,
        cores: &CoresConfig,
        report: Option<Duration>,
        spin: bool,
        make: F,
    ) -> Result<Self, String>
    where
        H: Handler<Counters = A>,
        F: Make<H>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = spawn_tcp_cores(&sock, tcp, cores, stop, spin, report, make)?;
        Ok(ServerHandle { cores })
    }

    /// [`Self::spawn`] on one new, unpinned thread named `name`.
    pub fn spawn_one<H, F>(
        name: &str,
        sock: SocketConfig,
        report: Option<Duration>,
        spin: bool,
        make: F,
    ) -> Result<Self, String>
    where
        H: Handler<Counters = A>,
        F: Make<H>,
    {
        let mut cores = CoresConfig::new(name, 1);
        cores.pin = false;
        Self::spawn(sock, &cores, report, spin, make)
    }

    /// The address core 0 listens on.
    pub fn addr(&self) -> SocketAddrV4 {
        self.cores.ready()[0].0
    }

    /// The scatter-gather entries one packet of the datapath may have (header included).
    pub fn max_segments(&self) -> usize {
        self.cores.ready()[0].1
    }

    /// Every core's address, by core index (a client steers by these).
    pub fn addrs(&self) -> Vec<SocketAddrV4> {
        self.cores.ready().iter().map(|r| r.0).collect()
    }

    /// Stops the server and returns its final counters, summed over the cores.
    pub fn stop(self) -> io::Result<ServerStats<A>> {
        self.stop_per_core().map(|per| ServerStats::sum(&per))
    }

    /// Stops the server and returns each core's final counters, by core index.
    pub fn stop_per_core(self) -> io::Result<Vec<ServerStats<A>>> {
        self.cores.stop().map_err(io::Error::other)
    }

    /// Serves until `stop` is set, then stops and returns each core's final counters (printed
    /// per core on stderr when there are several).
    pub fn serve_until(self, stop: &AtomicBool) -> Result<Vec<ServerStats<A>>, String> {
        self.cores.serve_until(stop, "[server]")
    }
}
