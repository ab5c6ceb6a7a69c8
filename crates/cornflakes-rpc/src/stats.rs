//! What a server has seen: the counters every server keeps, plus its handler's own.

use std::fmt;

use cornflakes::datapath::{DropCounters, SendCounters};
use latency::LatencyHistogram;
use percore::TimeSplit;

/// The handler's own counters, kept beside the skeleton's (e.g. the KV store's keys and
/// bytes). `()` for a handler without any.
pub trait AppCounters: Clone + Default + Send + 'static {
    /// The name of the replies counter in reports (`replied`; echo says `echoed`).
    const REPLIED: &'static str = "replied";
    /// Adds another core's counters to these.
    fn add(&mut self, other: &Self);
    /// Writes the counters as ` key=value` pairs (each with a leading space) for reports.
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Reads back one ` key=value` pair [`Self::write`] wrote; false when `key` is not one of
    /// these counters.
    fn parse_field(&mut self, key: &str, value: u64) -> bool {
        let _ = (key, value);
        false
    }
}

impl AppCounters for () {
    fn add(&mut self, _: &()) {}
    fn write(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

/// What a server has seen so far.
#[derive(Clone, Debug, Default)]
pub struct ServerStats<A = ()> {
    /// Messages the datapath delivered.
    pub received: u64,
    /// Replies queued.
    pub replied: u64,
    /// Requests that did not parse (unknown type, bad encoding, ...): dropped, unanswered.
    pub malformed: u64,
    /// Replies that met a full send queue and were sent again, after a flush and a reap of
    /// completions (the built reply, never the request: [`crate::Tx`]).
    pub send_retries: u64,
    /// Replies that could not be sent (too large, no buffer, still full after the retry):
    /// dropped.
    pub send_failed: u64,
    /// Errors from the datapath's receive or flush calls.
    pub io_errors: u64,
    /// Time to handle a request (decode, act, build and queue the reply), without the receive
    /// and flush calls, for one request in [`crate::Handler::work_sample_every`] (by default
    /// [`crate::WORK_SAMPLE_EVERY`]; the first, then every N-th): a sample whose median and
    /// tail estimate the population's. Read the median: a sample may include preemption.
    pub work: LatencyHistogram,
    /// Where the core's time went, timed per burst ([`TimeSplit`]; [`crate::Server::poll`]).
    pub time: TimeSplit,
    /// The datapath's drop counters.
    pub datapath: DropCounters,
    /// What the datapath's sends handed the kernel by reference and what was copied, for a
    /// datapath that chooses per send (kernel TCP, Demikernel); `None` otherwise, and then not
    /// shown.
    pub sends: Option<SendCounters>,
    /// Why the last malformed request was dropped.
    pub last_malformed: Option<String>,
    /// The handler's own counters.
    pub app: A,
}

impl<A: AppCounters> ServerStats<A> {
    /// Adds another core's counters to these.
    pub fn add(&mut self, o: &ServerStats<A>) {
        self.received += o.received;
        self.replied += o.replied;
        self.malformed += o.malformed;
        self.send_retries += o.send_retries;
        self.send_failed += o.send_failed;
        self.io_errors += o.io_errors;
        self.work.merge(&o.work);
        self.time.add(&o.time);
        self.datapath.add(&o.datapath);
        if let Some(s) = &o.sends {
            self.sends.get_or_insert_with(SendCounters::default).add(s);
        }
        self.app.add(&o.app);
        if o.last_malformed.is_some() {
            self.last_malformed.clone_from(&o.last_malformed);
        }
    }

    /// The counters of several cores, summed.
    pub fn sum(per_core: &[ServerStats<A>]) -> ServerStats<A> {
        let mut all = ServerStats::default();
        for s in per_core {
            all.add(s);
        }
        all
    }

    /// Median handling time per request, nanoseconds (see [`Self::work`]).
    pub fn work_p50_ns(&self) -> Option<f64> {
        self.work.p50_us().map(|us| us * 1000.0)
    }

    /// Reads the counters back from their display (`received=… replied=… …`, e.g. the last
    /// line of a child server process). The histogram crosses the process boundary as one
    /// sample, its median, and the time split whole (`split_ns=…`); unknown keys are
    /// skipped.
    pub fn parse(text: &str) -> ServerStats<A> {
        let mut stats = ServerStats::<A>::default();
        for kv in text.split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let n = || v.trim_end_matches("ns").parse::<u64>().unwrap_or(0);
            match k {
                "received" => stats.received = n(),
                k if k == A::REPLIED => stats.replied = n(),
                "malformed" => stats.malformed = n(),
                "send_retries" => stats.send_retries = n(),
                "send_failed" => stats.send_failed = n(),
                "io_errors" => stats.io_errors = n(),
                "work_p50" => stats.work.record(std::time::Duration::from_nanos(n())),
                "split_ns" => stats.time = TimeSplit::parse_token(v).unwrap_or_default(),
                k if SendCounters::KEYS.contains(&k) => {
                    let sends = stats.sends.get_or_insert_with(SendCounters::default);
                    sends.parse_field(k, n());
                }
                k => {
                    stats.app.parse_field(k, n());
                }
            }
        }
        stats
    }
}

impl<A: AppCounters> fmt::Display for ServerStats<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "received={} {}={} malformed={} send_failed={} send_retries={} io_errors={} datapath_drops={}",
            self.received,
            A::REPLIED,
            self.replied,
            self.malformed,
            self.send_failed,
            self.send_retries,
            self.io_errors,
            self.datapath.total_drops(),
        )?;
        if let Some(s) = &self.sends {
            write!(f, "{s}")?;
        }
        self.app.write(f)?;
        write!(f, " work_p50={:.0}ns", self.work_p50_ns().unwrap_or(0.0))?;
        // Where the time went, as numbers a parent process reads back (`parse`).
        write!(f, " split_ns={}", self.time.token())?;
        if let Some(why) = &self.last_malformed {
            write!(f, " last_malformed={why:?}")?;
        }
        Ok(())
    }
}

impl<A: AppCounters> percore::CoreStats for ServerStats<A> {
    fn sum(per_core: &[Self]) -> Self {
        ServerStats::sum(per_core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_counters_show_only_for_a_datapath_that_has_them_and_read_back() {
        let mut st = ServerStats::<()> {
            received: 3,
            replied: 3,
            ..ServerStats::default()
        };
        let udp = st.to_string();
        assert!(!udp.contains("zc_") && !udp.contains("copied"), "{udp}");
        let mut sends = SendCounters::default();
        (sends.zero_copy_sends, sends.zero_copy_bytes) = (2, 65_536);
        (sends.copied_sends, sends.copied_bytes) = (1, 120);
        st.sends = Some(sends);
        let tcp = st.to_string();
        assert!(
            tcp.contains(" datapath_drops=0 zc_sends=2 zc_bytes=65536 zc_copied_sends=0"),
            "{tcp}"
        );
        let back = ServerStats::<()>::parse(&tcp);
        assert_eq!(back.sends, st.sends);
        assert_eq!(ServerStats::<()>::parse(&udp).sends, None);
        // Cores add up; a core without them adds nothing.
        let sum = ServerStats::sum(&[st.clone(), ServerStats::default(), st]);
        assert_eq!(
            sum.sends.map(|s| (s.zero_copy_sends, s.copied_bytes)),
            Some((4, 240))
        );
    }
}
