//! Request counters, mergeable across client threads.

use std::fmt;

/// Request outcomes. Every sent request ends up in exactly one of
/// `verified`, `mismatched` or `lost` (so `sent == verified + mismatched +
/// lost` once a run is over); `unexpected` and `malformed` count responses
/// that matched no outstanding request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests handed to the transport successfully.
    pub sent: u64,
    /// Requests answered in time with a response the checker accepted.
    pub verified: u64,
    /// Requests answered in time with a response the checker rejected.
    pub mismatched: u64,
    /// Requests with no response within the timeout (lost or too late).
    pub lost: u64,
    /// Responses for ids never sent or already settled (duplicates, late
    /// arrivals after a timeout, ids from another run).
    pub unexpected: u64,
    /// Responses whose request id the transport could not read.
    pub malformed: u64,
    /// `send_request` calls that returned an error.
    pub send_errors: u64,
    /// `poll_responses` calls that returned an error.
    pub poll_errors: u64,
}

impl Counters {
    /// Adds `other` into `self`, field by field.
    pub fn merge(&mut self, other: &Counters) {
        self.sent += other.sent;
        self.verified += other.verified;
        self.mismatched += other.mismatched;
        self.lost += other.lost;
        self.unexpected += other.unexpected;
        self.malformed += other.malformed;
        self.send_errors += other.send_errors;
        self.poll_errors += other.poll_errors;
    }

    /// Total of all error counters.
    pub fn errors(&self) -> u64 {
        self.mismatched
            + self.lost
            + self.unexpected
            + self.malformed
            + self.send_errors
            + self.poll_errors
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent={} ok={} mismatched={} lost={} unexpected={} malformed={} send_err={} poll_err={}",
            self.sent,
            self.verified,
            self.mismatched,
            self.lost,
            self.unexpected,
            self.malformed,
            self.send_errors,
            self.poll_errors
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_merge_and_total() {
        let mut a = Counters {
            sent: 10,
            verified: 7,
            mismatched: 1,
            lost: 2,
            ..Counters::default()
        };
        let b = Counters {
            sent: 5,
            verified: 5,
            unexpected: 3,
            malformed: 4,
            send_errors: 1,
            poll_errors: 2,
            ..Counters::default()
        };
        a.merge(&b);
        assert_eq!(a.sent, 15);
        assert_eq!(a.verified, 12);
        assert_eq!(a.malformed, 4);
        assert_eq!(a.errors(), 1 + 2 + 3 + 4 + 1 + 2);
    }
}
