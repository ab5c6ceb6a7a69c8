//! What one client measures against a running echo server ([`SweepPlan`]): shared by the
//! kernel-socket and TCP sweeps ([`crate::bench`]) and the kernel-bypass client cores
//! ([`crate::bypass`]).

use std::net::{Ipv4Addr, SocketAddrV4};

use loadgen::args::LoadConfig;
use loadgen::{SweepConfig, DEFAULT_KEEP_UP};

use crate::mode::Mode;
use crate::shape::ShapeSpec;

/// How one client measures one mode against a running server.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// Mode (decides the request format and the label).
    pub mode: Mode,
    /// Message shape.
    pub shape: ShapeSpec,
    /// Server address.
    pub server: SocketAddrV4,
    /// Address the client sockets bind (port 0).
    pub bind: Ipv4Addr,
    /// The load: `load.rates` are the offered loads, run in this order; timing, client
    /// threads, MTU and busy-polling as configured (its `out_dir` is the caller's to use).
    pub load: LoadConfig,
    /// See [`crate::config::BenchConfig::stop_after_misses`].
    pub stop_after_misses: usize,
    /// The server's cores after the first (core 0 is `server`): requests are spread over
    /// all of them round-robin. Empty: one core.
    pub other_cores: Vec<SocketAddrV4>,
    /// `Some(n)`: over kernel TCP, `n` connections per server core per client thread;
    /// `None`: UDP sockets.
    pub tcp_conns: Option<usize>,
    /// Over kernel TCP: the clients' zero-copy sends.
    pub tcp: app_server::TcpSpec,
}

impl SweepPlan {
    /// The sweep of its loads, with progress lines: stops after
    /// [`SweepPlan::stop_after_misses`] points in a row below 95 % of offered.
    pub fn sweep_config(&self) -> SweepConfig {
        SweepConfig {
            mode: self.mode.name().to_owned(),
            shape: self.shape.to_string(),
            loads_rps: self.load.rates.clone(),
            keep_up: DEFAULT_KEEP_UP,
            stop_after_misses: self.stop_after_misses,
            progress: true,
        }
    }
}
