//! What is kept of a trial's run thrown away because its speed canary read slowed
//! ([`crate::search_rerunning_slowed`]).

use loadgen::canary::Speed;
use serde_json::{json, Value};

/// A run of a trial thrown away because its speed canary read slowed
/// ([`crate::search_rerunning_slowed`]): what the points file keeps of it.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowedRun {
    /// Verified replies per second it achieved.
    pub achieved_rps: f64,
    /// The server's median handling time per request, nanoseconds.
    pub work_p50_ns: Option<f64>,
    /// The device thread's utilisation (0–1).
    pub device_busy: f64,
    /// Its speed canary (re-judged with the run's by [`crate::rebase_canaries`]).
    pub canary: Speed,
    /// Replies that failed verification and replies whose headers or framing were wrong: a
    /// run thrown away still counts them ([`crate::EmuSummary::mismatched`], so a bench exits
    /// non-zero on them).
    pub mismatched: u64,
    /// See `mismatched`.
    pub malformed: u64,
    /// What the failed checks said.
    pub failures: Vec<String>,
}

impl SlowedRun {
    /// As JSON (in a trial's `thrown_slowed_runs` in `emu-points.json`).
    pub fn to_json(&self) -> Value {
        json!({
            "achieved_rps": self.achieved_rps,
            "work_p50_ns": self.work_p50_ns,
            "device_busy": self.device_busy,
            "slowed": self.canary.slowed(),
            "canary": self.canary.to_json(),
            "mismatched": self.mismatched,
            "malformed": self.malformed,
            "failures": self.failures,
        })
    }
}
