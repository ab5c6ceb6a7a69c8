//! What a server runs for each request: the [`Handler`] interface of the server skeleton
//! ([`crate::Server`]), why a request got no reply ([`Unanswered`]) and which core it is built
//! for ([`CoreId`], [`Make`]).

use cornflakes::{Datapath, DecodeError, RxMsg, SendError};

use crate::AppCounters;

/// By default the handling time is timed for one request in this many: two clock reads cost
/// ~60 instructions, several percent of a cheap handler's whole work, and a systematic 1-in-16
/// sample estimates the median and tail as well at any rate the benchmarks reach. The counts
/// and the throughput cover every request.
pub const WORK_SAMPLE_EVERY: u64 = 16;

/// Why a request got no reply.
#[derive(Debug)]
pub enum Unanswered {
    /// The request did not parse; why (the server keeps the last reason).
    Malformed(String),
    /// The reply could not be sent (after the one retry of a full queue).
    Send(SendError),
}

impl From<SendError> for Unanswered {
    fn from(e: SendError) -> Self {
        Unanswered::Send(e)
    }
}

impl From<DecodeError> for Unanswered {
    /// A request (or a field of it read in place) that does not decode is malformed.
    fn from(e: DecodeError) -> Self {
        Unanswered::Malformed(e.to_string())
    }
}

/// What a server does with each request: the only part of a server an app writes (or a
/// dispatcher generated from a `service` implements).
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
