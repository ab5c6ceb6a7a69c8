//! Running the echo server over AF_XDP (feature `xdp`, needs root): a network namespace with
//! one end of a veth pair, where the server's XDP datapath runs, and the other end in this
//! namespace, where the benchmark's client core runs over AF_XDP too (or its clients use
//! kernel UDP sockets, `--client-datapath socket`).
//!
//! A thread cannot enter a namespace without `setns(2)`, and this crate has no `unsafe`, so
//! the server runs as a child process under `ip netns exec` (`echo server --datapath xdp`).
//! The namespace, the veth pair and the child process are netns-harness's ([`HostVeth`],
//! [`ChildServer`]), shared with `kv bench --datapath xdp`.

use std::net::SocketAddrV4;
use std::time::Duration;

use app_server::datapath_xdp::bpf::ProgramStats;
use netns_harness::{ChildServer, HostVeth, Suite};

use crate::server::{ServerConfig, ServerStats};

/// Names of the benchmark's namespace and interfaces (`cfecho-…`, `cfe…s` / `cfe…c`); its
/// subnet is leased from `netns_harness::subnet`, unique among all suites running.
pub const SUITE: Suite = Suite::new("cfecho", "cfe", "CORNFLAKES_REQUIRE_XDP");

/// The port of the benchmark's AF_XDP client core on this side's end of the veth.
pub const CLIENT_PORT: u16 = 9000;

/// Creates the benchmark's namespace and veth pair with `mtu` on both ends.
pub fn create_netns(mtu: usize) -> Result<HostVeth, String> {
    let mtu = u32::try_from(mtu).map_err(|_| format!("MTU {mtu} is too large"))?;
    HostVeth::create(&SUITE, mtu).map_err(|e| format!("creating the namespace and veth: {e}"))
}

/// An `echo server --datapath xdp` child process inside a [`HostVeth`].
pub struct ServerProcess {
    child: ChildServer,
    /// Where it listens.
    pub addr: SocketAddrV4,
}

/// The line the server prints once its datapath is up.
pub const READY: &str = "[server] ready";

impl ServerProcess {
    /// Starts this executable as a server of `cfg` in `ns`, port `port`, and waits until it
    /// is ready. It stops when its standard input closes ([`Self::stop`]).
    pub fn spawn(ns: &HostVeth, cfg: ServerConfig, port: u16) -> Result<ServerProcess, String> {
        let args = [
            "server",
            "--mode",
            cfg.mode.name(),
            "--threshold",
            &cfg.threshold.to_string(),
        ]
        .map(str::to_owned);
        Self::spawn_args(ns, port, &args)
    }

    /// Starts this executable with `args` (a server subcommand and its own flags) plus the
    /// AF_XDP flags in `ns`, port `port`, and waits until it prints [`READY`].
    pub fn spawn_args(ns: &HostVeth, port: u16, args: &[String]) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
        let child = ChildServer::spawn(ns, &exe, args, port, READY, Duration::from_secs(30))?;
        Ok(ServerProcess {
            addr: child.addr,
            child,
        })
    }

    /// Closes the server's standard input, waits for it to exit and returns the counters it
    /// printed last (malformed count and median handling time).
    pub fn stop(self) -> Result<ServerStats, String> {
        let lines = self.child.stop()?;
        let mut stats = ServerStats::default();
        for line in &lines {
            if let Some(done) = line.split(" done: ").nth(1) {
                stats = parse_counters(done);
            }
        }
        Ok(stats)
    }
}

/// Each core's final counters from the lines of an `echo server --cores N` child
/// ([`ChildServer::stop`]: `[server] core i: received=… echoed=…`), by core index; empty for
/// one core.
pub fn parse_core_stats(lines: &[String]) -> Vec<ServerStats> {
    percore::core_lines(lines, "[server]")
        .into_iter()
        .map(parse_counters)
        .collect()
}

/// The XDP program's counters an `echo server --datapath xdp --cores N` child printed when it
/// stopped (`[server] XDP program: redirected=… misteered=…`), if it printed them.
pub fn parse_program_stats(lines: &[String]) -> Option<Result<ProgramStats, String>> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("[server] XDP program: "))
        .map(str::parse)
}

/// `received=… echoed=… …` (the [`ServerStats`] display) back into counters.
fn parse_counters(text: &str) -> ServerStats {
    ServerStats::parse(text)
}
