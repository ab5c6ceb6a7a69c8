//! Where a server core's time went: [`TimeSplit`], summed over its polls, and the clock it
//! is timed with ([`now_ns`]).

use std::fmt;

/// Now on the monotonic clock (`CLOCK_MONOTONIC`, the clock [`std::time::Instant`] reads), in
/// nanoseconds, as an integer: two readings subtract in one instruction, where
/// `Instant - Instant` normalizes a `timespec` (about 50 instructions). For hot loops that
/// time bursts ([`TimeSplit`]) or their own iterations.
#[allow(unsafe_code)]
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; CLOCK_MONOTONIC
    // exists on every Linux, so the call cannot fail on its arguments.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// One part of a server core's time ([`TimeSplit::ns`], [`TimeSplit::share`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The datapath's receive call of polls that found requests (and the poll loop between
    /// polls).
    Receive,
    /// The handler without its sends: decoding, acting, building the reply.
    Handler,
    /// The handler's send calls (estimated from the sampled requests: [`TimeSplit::send_ns`]).
    Send,
    /// The flush after each burst and the reaping of send completions.
    FlushReap,
    /// Polls that found nothing, and any wait after them.
    Idle,
}

impl Part {
    /// Every part, in the order reports list them.
    pub const ALL: [Part; 5] = [
        Part::Receive,
        Part::Handler,
        Part::Send,
        Part::FlushReap,
        Part::Idle,
    ];

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Part::Receive => "receive",
            Part::Handler => "handler",
            Part::Send => "send",
            Part::FlushReap => "flush+reap",
            Part::Idle => "idle",
        }
    }
}

/// Where a server core's time went, timed per burst, not per request: each poll that found
/// requests reads the clock after its receive call, after its handler calls and after its
/// flush and reap (three reads per burst); a poll that found nothing reads it once and counts
/// as idle. The handler's sends are inside its time: the part spent in send calls is timed
/// only on the requests whose handling is sampled anyway (one in
/// `Handler::work_sample_every`), and [`send_ns`](Self::send_ns) scales it to the handler's
/// whole time.
///
/// All times are nanoseconds; the parts add up to the poll loop's time since the server was
/// made (or since it was last told it waited, for a loop that blocks between polls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeSplit {
    /// Receive calls of polls that found requests, and the loop between polls.
    pub receive_ns: u64,
    /// Handler calls, sends included.
    pub handler_ns: u64,
    /// Flushes and completion reaping after each burst.
    pub flush_reap_ns: u64,
    /// Polls that found nothing, and any wait after them.
    pub idle_ns: u64,
    /// Polls that found requests.
    pub bursts: u64,
    /// Requests those polls found.
    pub requests: u64,
    /// Handler time of the sampled requests.
    pub sampled_ns: u64,
    /// Of which in send calls.
    pub sampled_send_ns: u64,
}

impl TimeSplit {
    /// Adds another core's (or another run's) split to this one.
    pub fn add(&mut self, o: &TimeSplit) {
        self.receive_ns += o.receive_ns;
        self.handler_ns += o.handler_ns;
        self.flush_reap_ns += o.flush_reap_ns;
        self.idle_ns += o.idle_ns;
        self.bursts += o.bursts;
        self.requests += o.requests;
        self.sampled_ns += o.sampled_ns;
        self.sampled_send_ns += o.sampled_send_ns;
    }

    /// Everything timed.
    pub fn total_ns(&self) -> u64 {
        self.busy_ns() + self.idle_ns
    }

    /// Everything but idle.
    pub fn busy_ns(&self) -> u64 {
        self.receive_ns + self.handler_ns + self.flush_reap_ns
    }

    /// The handler's time in send calls, estimated: its whole time scaled by the share the
    /// sampled requests spent sending (0 without a sample).
    pub fn send_ns(&self) -> f64 {
        if self.sampled_ns == 0 {
            return 0.0;
        }
        let share = (self.sampled_send_ns as f64 / self.sampled_ns as f64).min(1.0);
        self.handler_ns as f64 * share
    }

    /// Nanoseconds of `part`.
    pub fn ns(&self, part: Part) -> f64 {
        match part {
            Part::Receive => self.receive_ns as f64,
            Part::Handler => self.handler_ns as f64 - self.send_ns(),
            Part::Send => self.send_ns(),
            Part::FlushReap => self.flush_reap_ns as f64,
            Part::Idle => self.idle_ns as f64,
        }
    }

    /// The share of the whole time `part` took (0–1; 0 when nothing was timed).
    pub fn share(&self, part: Part) -> f64 {
        match self.total_ns() {
            0 => 0.0,
            t => self.ns(part) / t as f64,
        }
    }

    /// Busy nanoseconds per request: what the core spent on each, receive to reap
    /// (`None` before any request).
    pub fn busy_per_request_ns(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.busy_ns() as f64 / self.requests as f64)
    }

    /// Nanoseconds of `part` per request (`None` before any request).
    pub fn per_request_ns(&self, part: Part) -> Option<f64> {
        (self.requests > 0).then(|| self.ns(part) / self.requests as f64)
    }

    /// Requests per poll that found any.
    pub fn requests_per_burst(&self) -> Option<f64> {
        (self.bursts > 0).then(|| self.requests as f64 / self.bursts as f64)
    }

    /// The part that took the most time, with its share (`None` when nothing was timed); of
    /// parts with equal shares, the one listed first in [`Part::ALL`].
    pub fn dominant(&self) -> Option<(Part, f64)> {
        if self.total_ns() == 0 {
            return None;
        }
        Part::ALL
            .into_iter()
            .map(|p| (p, self.share(p)))
            .reduce(|a, b| if b.1 > a.1 { b } else { a })
    }

    /// The busy part that took the most time, with its share of the busy time (idle left
    /// out: for a server whose idle time means nothing, e.g. one that waits while other
    /// servers are measured); `None` when it was never busy.
    pub fn busiest(&self) -> Option<(Part, f64)> {
        let busy = self.busy_ns();
        if busy == 0 {
            return None;
        }
        [Part::Receive, Part::Handler, Part::Send, Part::FlushReap]
            .into_iter()
            .map(|p| (p, self.ns(p) / busy as f64))
            .reduce(|a, b| if b.1 > a.1 { b } else { a })
    }

    /// Busy nanoseconds per request and the busiest part's share of them, for a table cell:
    /// `412 (handler 58%)`; `–` before any request.
    pub fn busy_cell(&self) -> String {
        match (self.busy_per_request_ns(), self.busiest()) {
            (Some(ns), Some((p, share))) => {
                format!("{ns:.0} ({} {:.0}%)", p.name(), 100.0 * share)
            }
            _ => "–".to_owned(),
        }
    }

    /// The split in words: each part's share of the time, busy nanoseconds per request and
    /// requests per burst, e.g. `receive 14%, handler 40%, send 21%, flush+reap 9%, idle 16%;
    /// 412 ns busy per request, 7.9 per burst`.
    pub fn describe(&self) -> String {
        if self.total_ns() == 0 {
            return "not timed".to_owned();
        }
        let parts: Vec<String> = Part::ALL
            .into_iter()
            .map(|p| format!("{} {:.0}%", p.name(), 100.0 * self.share(p)))
            .collect();
        let per = match (self.busy_per_request_ns(), self.requests_per_burst()) {
            (Some(ns), Some(b)) => format!("; {ns:.0} ns busy per request, {b:.1} per burst"),
            _ => String::new(),
        };
        format!("{}{per}", parts.join(", "))
    }

    /// The counters as one `key=value` token's value (`receive/handler/flush_reap/idle/
    /// bursts/requests/sampled/sampled_send`, slash-separated), for a report line a parent
    /// process reads back with [`parse_token`](Self::parse_token).
    pub fn token(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/{}/{}/{}",
            self.receive_ns,
            self.handler_ns,
            self.flush_reap_ns,
            self.idle_ns,
            self.bursts,
            self.requests,
            self.sampled_ns,
            self.sampled_send_ns
        )
    }

    /// Reads back [`token`](Self::token)'s value (`None` when it is not one).
    pub fn parse_token(s: &str) -> Option<TimeSplit> {
        let v: Vec<u64> = s
            .split('/')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let [receive_ns, handler_ns, flush_reap_ns, idle_ns, bursts, requests, sampled_ns, sampled_send_ns] =
            v[..]
        else {
            return None;
        };
        Some(TimeSplit {
            receive_ns,
            handler_ns,
            flush_reap_ns,
            idle_ns,
            bursts,
            requests,
            sampled_ns,
            sampled_send_ns,
        })
    }
}

impl fmt::Display for TimeSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_monotonic_and_keeps_instants_pace() {
        let (a, i) = (now_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, d) = (now_ns(), i.elapsed().as_nanos() as u64);
        assert!(b > a);
        // The same clock: the two intervals agree within the reads' own time.
        assert!((b - a).abs_diff(d) < 5_000_000, "{} vs {d}", b - a);
    }

    fn split() -> TimeSplit {
        TimeSplit {
            receive_ns: 100,
            handler_ns: 500,
            flush_reap_ns: 100,
            idle_ns: 300,
            bursts: 2,
            requests: 10,
            sampled_ns: 50,
            sampled_send_ns: 20,
        }
    }

    #[test]
    fn parts_add_up_and_the_send_share_comes_from_the_sample() {
        let s = split();
        assert_eq!((s.total_ns(), s.busy_ns()), (1000, 700));
        // 20 of the sample's 50 ns were sends: 40 % of the handler's 500.
        assert_eq!(s.send_ns(), 200.0);
        assert_eq!((s.ns(Part::Handler), s.ns(Part::Send)), (300.0, 200.0));
        let sum: f64 = Part::ALL.iter().map(|&p| s.share(p)).sum();
        assert!((sum - 1.0).abs() < 1e-12, "{sum}");
        assert_eq!(s.busy_per_request_ns(), Some(70.0));
        assert_eq!(s.per_request_ns(Part::Send), Some(20.0));
        assert_eq!(s.requests_per_burst(), Some(5.0));
        assert_eq!(s.dominant(), Some((Part::Handler, 0.3)));
        // Of the busy 700 ns, the handler's 300.
        let (p, share) = s.busiest().unwrap();
        assert_eq!(p, Part::Handler);
        assert!((share - 3.0 / 7.0).abs() < 1e-12);
        assert_eq!(s.busy_cell(), "70 (handler 43%)");
        assert_eq!(TimeSplit::default().busy_cell(), "–");
        assert_eq!(
            s.describe(),
            "receive 10%, handler 30%, send 20%, flush+reap 10%, idle 30%; 70 ns busy per \
             request, 5.0 per burst"
        );
        // Without a sample the sends cannot be told apart: all of it is the handler's.
        let mut u = s;
        u.sampled_ns = 0;
        assert_eq!((u.ns(Part::Handler), u.ns(Part::Send)), (500.0, 0.0));
        assert_eq!(TimeSplit::default().describe(), "not timed");
        assert_eq!(TimeSplit::default().dominant(), None);
    }

    #[test]
    fn splits_add_and_cross_a_process_boundary_as_one_token() {
        let mut a = split();
        a.add(&split());
        assert_eq!(
            (a.total_ns(), a.requests, a.sampled_send_ns),
            (2000, 20, 40)
        );
        assert_eq!(TimeSplit::parse_token(&a.token()), Some(a));
        assert_eq!(TimeSplit::parse_token("1/2/3"), None);
        assert_eq!(TimeSplit::parse_token("1/2/3/4/5/6/7/x"), None);
    }
}
