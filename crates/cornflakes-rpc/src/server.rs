//! The server skeleton (`docs/cores.md`, "The pieces"; `crates/app-server/README.md`).
//!
//! A [`Server`] is a datapath queue and a [`Handler`]. Its [`Server::poll`] receives one
//! burst, hands each request to the handler, counts what became of it, times one request in
//! [`Handler::work_sample_every`], flushes once per burst and reaps completions. It also
//! splits the core's time ([`percore::TimeSplit`]: receive, handler, the sampled requests'
//! sends, flush and reap, idle) with three clock reads per burst and one per poll that found
//! nothing, never per request. The handler
//! only answers one request: decode, act, build the reply, send it. It sends through a
//! [`Tx`], the server's datapath lent for that request, which retries a send that meets a full
//! queue (after a flush and a reap) with the reply already built; the request is never run
//! twice, so a write is applied once however full the queue is.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cornflakes::{Datapath, RxMsg};
use percore::{now_ns, TimeSplit};

use crate::{Handler, ServerStats, Tx, TxCounters, Unanswered};

/// A server on one datapath queue: `dp` and a handler.
pub struct Server<D, H: Handler> {
    dp: D,
    handler: H,
    rx: Vec<RxMsg>,
    tx: TxCounters,
    sample_every: u64,
    stats: ServerStats<H::Counters>,
    /// The end of the last poll (or of the last wait after one), [`now_ns`]: where the next
    /// part of the time split starts.
    last: u64,
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
            last: now_ns(),
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
            sends: self.dp.send_counters(),
            app: self.handler.counters(),
            time: TimeSplit {
                sampled_send_ns: self.tx.sampled_send_ns,
                ..self.stats.time
            },
            ..self.stats.clone()
        }
    }

    /// Counts the time since the last poll as idle: for a loop that waits between polls
    /// (e.g. blocks until its socket is readable), so the wait is not counted as the next
    /// burst's receive time. [`Server::run`] calls it after every idle wait.
    pub fn waited(&mut self) {
        let now = now_ns();
        self.stats.time.idle_ns += now.saturating_sub(self.last);
        self.last = now;
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
        if n == 0 {
            self.rx = rx;
            self.dp.poll_completions();
            // A poll that found nothing is idle time, reaping included.
            self.waited();
            return 0;
        }
        let received = now_ns();
        for m in rx.drain(..) {
            let start = self
                .stats
                .received
                .is_multiple_of(self.sample_every)
                .then(now_ns);
            self.stats.received += 1;
            let outcome = self.handler.handle(
                &mut Tx::new(&mut self.dp, &mut self.tx).timed(start.is_some()),
                &m,
            );
            if let Some(start) = start {
                let work = now_ns().saturating_sub(start);
                self.stats.work.record(Duration::from_nanos(work));
                self.stats.time.sampled_ns += work;
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
        let handled = now_ns();
        if self.dp.flush().is_err() {
            self.stats.io_errors += 1;
        }
        self.dp.poll_completions();
        let end = now_ns();
        let t = &mut self.stats.time;
        t.receive_ns += received.saturating_sub(self.last);
        t.handler_ns += handled.saturating_sub(received);
        t.flush_reap_ns += end.saturating_sub(handled);
        t.bursts += 1;
        t.requests += n as u64;
        self.last = end;
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
            idle(&s.dp);
            s.waited();
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
