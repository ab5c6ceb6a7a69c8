//! `run --datapath xdp` (feature `xdp`, needs root): the calibration server runs as a child
//! process (`calibrate server --datapath xdp`) in a network namespace at one end of a veth
//! pair, the clients use kernel UDP sockets at the other end. The namespace, the veth pair and
//! the child are netns-harness's ([`HostVeth`], [`ChildServer`]).

use std::net::SocketAddrV4;
use std::time::Duration;

use netns_harness::{ChildServer, HostVeth, Suite};

use crate::server::ServerStats;

/// Names of the calibration's namespace and interfaces and its subnet (`10.73.N.0/24`).
pub const SUITE: Suite = Suite::new("cfcalx", "ccx", 73, "CORNFLAKES_REQUIRE_XDP");

/// The line the server prints once its datapath is up (the launcher's).
const READY: &str = "[server] ready";

/// Creates the namespace and veth pair with `mtu` on both ends.
pub fn create_netns(mtu: usize) -> Result<HostVeth, String> {
    let mtu = u32::try_from(mtu).map_err(|_| format!("MTU {mtu} is too large"))?;
    HostVeth::create(&SUITE, mtu).map_err(|e| format!("creating the namespace and veth: {e}"))
}

/// A `calibrate server --datapath xdp` child process inside a [`HostVeth`].
pub struct ServerProcess {
    child: ChildServer,
    /// Where it listens.
    pub addr: SocketAddrV4,
}

impl ServerProcess {
    /// Starts this executable with `args` (the server subcommand and its own flags) plus the
    /// AF_XDP flags in `ns`, port `port`, and waits until it is ready. It stops when its
    /// standard input closes ([`Self::stop`]).
    pub fn spawn_args(ns: &HostVeth, port: u16, args: &[String]) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
        let child = ChildServer::spawn(ns, &exe, args, port, READY, Duration::from_secs(30))?;
        Ok(ServerProcess {
            addr: child.addr,
            child,
        })
    }

    /// Closes the server's standard input, waits for it to exit and returns the counters it
    /// printed last (`[server] calibrate done: received=… echoed=…`).
    pub fn stop(self) -> Result<ServerStats, String> {
        let lines = self.child.stop()?;
        Ok(lines
            .iter()
            .rev()
            .find_map(|l| l.split(" done: ").nth(1))
            .map(ServerStats::parse)
            .unwrap_or_default())
    }
}
