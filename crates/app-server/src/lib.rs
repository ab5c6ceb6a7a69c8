//! The one server skeleton of the apps (`docs/cores.md`, "One server skeleton").
//!
//! A [`Server`] is a datapath queue and a [`Handler`]. Its [`Server::poll`] receives one
//! burst, hands each request to the handler, counts what became of it, times one request in
//! [`Handler::work_sample_every`], flushes once per burst and reaps completions. The handler
//! only answers one request: decode, act, build the reply, send it. It sends through a
//! [`Tx`], the server's datapath lent for that request, which retries a send that meets a full
//! queue (after a flush and a reap) with the reply already built; the request is never run
//! twice, so a write is applied once however full the queue is (issue #24).
//!
//! [`launch`] runs a handler on the datapath a [`Launch`] names (`--datapath socket | xdp |
//! mlx5 | ice`, parsed once by [`Transport::from_args`]), on one core or N: the one place that
//! opens datapaths for servers, prints their ready lines and idles them ([`idle`]).
//! [`ServerHandle`] runs server cores on sockets in this process (tests, benchmarks). Echo,
//! the KV store and the calibration server are handlers.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
pub mod idle;
mod launch;
pub mod nic;
mod ready;
mod socket;
mod stats;
mod tx;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cornflakes::{Datapath, RxMsg, SendError};

pub use launch::{launch, Launch, Transport, XdpSpec};
pub use nic::{CargoRun, NicSpec};
pub use ready::CoreStats;
pub use socket::ServerHandle;
pub use stats::{AppCounters, ServerStats};
pub use tx::{Tx, TxCounters};

/// By default the handling time ([`ServerStats::work`]) is timed for one request in this
/// many: two clock reads cost ~60 instructions, several percent of a cheap handler's whole
/// work, and a systematic 1-in-16 sample estimates the median and tail as well at any rate
/// the benchmarks reach. The counts and the throughput cover every request.
pub const WORK_SAMPLE_EVERY: u64 = 16;

/// Why a request got no reply.
#[derive(Debug)]
pub enum Unanswered {
    /// The request did not parse; why (kept in [`ServerStats::last_malformed`]).
    Malformed(String),
    /// The reply could not be sent (after the one retry of a full queue).
    Send(SendError),
}

impl From<SendError> for Unanswered {
    fn from(e: SendError) -> Self {
        Unanswered::Send(e)
    }
}

/// What a server does with each request: the only part of a server an app writes.
pub trait Handler {
    /// The handler's own counters (`()` when it has none).
    type Counters: AppCounters;

    /// What it serves, for the report line (`[server {label} {addr}] …`): e.g. the echo mode.
    fn label(&self) -> String;

    /// Answers one request received on `dp`: decodes it, acts, builds the reply and sends it
    /// on `dp` (whose sends retry a full queue with the built reply; never retry here).
    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered>;

    /// The handler's counters so far.
    fn counters(&self) -> Self::Counters;

    /// Time one request in this many (1: every one).
    fn work_sample_every(&self) -> u64 {
        WORK_SAMPLE_EVERY
    }
}

/// Which core a handler is built for: core `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreId {
    /// This core, 0..count.
    pub index: usize,
    /// How many server cores there are.
    pub count: usize,
}

impl CoreId {
    /// The only core of a one-core server.
    pub const ONE: CoreId = CoreId { index: 0, count: 1 };

    /// The id of a [`percore::Core`].
    pub fn of(core: &percore::Core) -> CoreId {
        CoreId {
            index: core.index(),
            count: core.count(),
        }
    }
}

/// Builds core `core`'s handler on that core's own thread, from its datapath's pinned memory
/// (e.g. loading that core's shard of a store). Whatever it prints comes before the core's
/// ready line.
pub trait Make<H>:
    Fn(&cornflakes::PinnedMemory, CoreId) -> Result<H, String> + Send + Sync + 'static
{
}

impl<H, F> Make<H> for F where
    F: Fn(&cornflakes::PinnedMemory, CoreId) -> Result<H, String> + Send + Sync + 'static
{
}

/// A server on one datapath queue: `dp` and a handler.
pub struct Server<D, H: Handler> {
    dp: D,
    handler: H,
    rx: Vec<RxMsg>,
    tx: TxCounters,
    sample_every: u64,
    stats: ServerStats<H::Counters>,
}

impl<D: Datapath, H: Handler> Server<D, H> {
    /// `handler` serving on `dp`.
    pub fn new(dp: D, handler: H) -> Self {
        let sample_every = handler.work_sample_every().max(1);
        Server {
            dp,
            handler,
            rx: Vec::with_capacity(64),
            tx: TxCounters::default(),
            sample_every,
            stats: ServerStats::default(),
        }
    }

    /// The datapath.
    pub fn datapath(&self) -> &D {
        &self.dp
    }

    /// The datapath, mutably (tests drive completions through it).
    pub fn datapath_mut(&mut self) -> &mut D {
        &mut self.dp
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, mutably (e.g. to load a store).
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// Counters so far.
    pub fn stats(&self) -> ServerStats<H::Counters> {
        ServerStats {
            send_retries: self.tx.retries,
            io_errors: self.stats.io_errors + self.tx.flush_errors,
            datapath: self.dp.counters(),
            app: self.handler.counters(),
            ..self.stats.clone()
        }
    }

    /// Receives one burst, answers every request in it and flushes. Returns the messages
    /// received. Never blocks; errors are counted, not returned.
    pub fn poll(&mut self) -> usize {
        let mut rx = std::mem::take(&mut self.rx);
        rx.clear();
        if self.dp.recv_burst(&mut rx).is_err() {
            self.stats.io_errors += 1;
        }
        let n = rx.len();
        for m in rx.drain(..) {
            let start = self
                .stats
                .received
                .is_multiple_of(self.sample_every)
                .then(Instant::now);
            self.stats.received += 1;
            let outcome = self
                .handler
                .handle(&mut Tx::new(&mut self.dp, &mut self.tx), &m);
            if let Some(start) = start {
                self.stats.work.record(start.elapsed());
            }
            match outcome {
                Ok(()) => self.stats.replied += 1,
                Err(Unanswered::Malformed(why)) => {
                    self.stats.malformed += 1;
                    self.stats.last_malformed = Some(why);
                }
                Err(Unanswered::Send(_)) => self.stats.send_failed += 1,
            }
        }
        self.rx = rx;
        if n > 0 && self.dp.flush().is_err() {
            self.stats.io_errors += 1;
        }
        self.dp.poll_completions();
        n
    }

    /// Polls until `stop` is set; after `idle_after` empty polls in a row calls `idle` (which
    /// may block briefly, e.g. until a socket is readable). With `report`, prints the counters
    /// on stderr that often ([`percore::poll_loop`]).
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        report: Option<Duration>,
        idle_after: u32,
        idle: &mut dyn FnMut(&D),
    ) {
        percore::poll_loop(self, stop, report, idle_after, &mut |s: &mut Self| {
            idle(&s.dp)
        });
    }
}

impl<D: Datapath, H: Handler> percore::Poll for Server<D, H> {
    type Stats = ServerStats<H::Counters>;

    fn poll(&mut self) -> usize {
        Server::poll(self)
    }

    fn stats(&self) -> Self::Stats {
        Server::stats(self)
    }

    fn report_line(&self) -> String {
        format!(
            "[server {} {}] {}",
            self.handler.label(),
            self.dp.local_addr(),
            self.stats()
        )
    }
}

#[cfg(test)]
mod tests;
