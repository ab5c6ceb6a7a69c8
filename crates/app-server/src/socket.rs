//! One server per core over kernel sockets: core *i* on the base port plus *i*.

use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cornflakes::PinnedMemory;
use datapath_socket::cores::{spawn_socket_cores, SocketCores, SocketServer};
use datapath_socket::{SocketConfig, SocketDatapath};
use percore::{Core, CoresConfig};

use crate::{AppCounters, Handler, Server, ServerStats};

impl<H: Handler> SocketServer for Server<SocketDatapath, H> {
    fn socket_datapath(&self) -> &SocketDatapath {
        self.datapath()
    }
}

/// Builds core `core`'s handler on its own thread, from its datapath's pinned memory (e.g.
/// loading that core's shard of a store).
pub trait SocketMake<H>:
    Fn(&PinnedMemory, &Core) -> Result<H, String> + Send + Sync + 'static
{
}

impl<H, F: Fn(&PinnedMemory, &Core) -> Result<H, String> + Send + Sync + 'static> SocketMake<H>
    for F
{
}

/// Server cores over the socket datapath, each on its own thread with its own socket
/// (core *i* on the base port plus *i*), handler and counters (`docs/cores.md`).
pub struct ServerHandle<A> {
    cores: SocketCores<(), ServerStats<A>>,
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
        F: SocketMake<H>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = spawn_socket_cores(sock, cores, stop, spin, report, move |dp, core| {
            let handler = make(cornflakes::datapath::DatapathMemory::memory(&dp), core)?;
            Ok((Server::new(dp, handler), ()))
        })?;
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
        F: SocketMake<H>,
    {
        let mut cores = CoresConfig::new(name, 1);
        cores.pin = false;
        Self::spawn(sock, &cores, report, spin, make)
    }

    /// The address core 0 listens on.
    pub fn addr(&self) -> SocketAddrV4 {
        self.cores.ready()[0].0
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
