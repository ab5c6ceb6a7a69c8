//! The ready lines and the end of a server on N cores, whatever its datapath: what every arm of
//! [`crate::launch`] prints and returns, in one place so every datapath reads the same.

use std::fmt;
use std::sync::atomic::AtomicBool;

use percore::{Cores, QueueInfo};

/// Counters that N cores return separately and a report sums (one home: `percore`).
pub use percore::CoreStats;

/// Prints one ready line per core: `[server] ready: {label} on {addr} ({what}, core i of N)`.
pub(crate) fn print_ready(label: &dyn fmt::Display, ready: &[QueueInfo]) {
    let n = ready.len();
    for (i, (addr, what)) in ready.iter().enumerate() {
        eprintln!("[server] ready: {label} on {addr} ({what}, core {i} of {n})");
    }
}

/// Prints each running core's ready line (its address and what it serves on, as `describe`
/// reads them from what the core reported), waits until `stop`, prints each core's counters
/// (with more than one core) and returns their sum.
pub(crate) fn serve_until<R, S>(
    running: Cores<R, S>,
    label: &dyn fmt::Display,
    stop: &AtomicBool,
    describe: impl Fn(&R) -> QueueInfo,
) -> Result<S, String>
where
    R: Send + 'static,
    S: CoreStats,
{
    let ready: Vec<QueueInfo> = running.ready().iter().map(describe).collect();
    print_ready(label, &ready);
    let per_core = running.serve_until(stop, "[server]")?;
    Ok(S::sum(&per_core))
}
