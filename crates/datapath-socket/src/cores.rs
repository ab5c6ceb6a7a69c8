//! N share-nothing server cores over kernel sockets (`docs/cores.md`): core *i* binds its own
//! socket on the base port plus *i* (one port per core), so a client picks the core — and, for
//! the KV store, the shard — by the destination port. `SO_REUSEPORT` (one port, the kernel
//! hashing each flow to a socket) would spread clients over the cores too, but by a hash the
//! client does not control, so key steering would be impossible; the servers use one port per
//! core.
//!
//! Each core opens its own [`SocketDatapath`] (socket, pinned memory, connection table) on its
//! own thread ([`percore::Cores`]), builds its server there, and polls it with the socket idle
//! policy ([`crate::idle::socket_idle`]).

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cornflakes::datapath::Connect as _;
use percore::{poll_loop, Core, Cores, CoresConfig, Poll};

use crate::{SocketConfig, SocketDatapath};

/// A server that runs over the socket datapath (the idle policy waits on its socket).
pub trait SocketServer: Poll {
    /// The server's datapath.
    fn socket_datapath(&self) -> &SocketDatapath;
}

/// Running socket server cores: what each reported when ready is its bound address and `R`.
pub type SocketCores<R, S> = Cores<(SocketAddrV4, R), S>;

/// Starts `cores.cores` server cores. Core *i* binds `sock.bind` with the port plus *i*
/// ([`percore::core_addr`]; port 0: each core an ephemeral port), then `make` builds its server
/// on that datapath (on the core's own thread) and returns it with what to report when ready.
/// Each core then polls until `stop` is set — blocking briefly on its socket when idle, or
/// yielding when `spin` — printing its counters every `report` — and returns its counters.
pub fn spawn_socket_cores<P, R, F>(
    sock: SocketConfig,
    cores: &CoresConfig,
    stop: Arc<AtomicBool>,
    spin: bool,
    report: Option<Duration>,
    make: F,
) -> Result<SocketCores<R, P::Stats>, String>
where
    P: SocketServer,
    R: Send + 'static,
    F: Fn(SocketDatapath, &Core) -> Result<(P, R), String> + Send + Sync + 'static,
{
    Cores::spawn_with_stop(cores, stop, move |core, ready| {
        let mut sc = sock.clone();
        sc.bind = percore::core_addr(sock.bind, core.index())?;
        let bind = sc.bind;
        let dp = SocketDatapath::new(sc).map_err(|e| format!("binding {bind}: {e}"))?;
        let addr = dp.local_addr();
        let (mut server, info) = make(dp, &core)?;
        ready.ready((addr, info));
        let (after, mut hook) = crate::idle::socket_idle(spin);
        poll_loop(&mut server, core.stop(), report, after, &mut |s: &mut P| {
            hook(s.socket_datapath())
        });
        Ok(server.stats())
    })
}
