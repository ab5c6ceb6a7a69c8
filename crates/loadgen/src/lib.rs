//! Transport-agnostic open-loop load generator.
//!
//! The pieces, in the order a benchmark uses them:
//!
//! 1. [`Schedule::poisson`] generates exponential inter-arrival gaps at the
//!    offered rate before the run, split across client threads.
//! 2. A datapath implements [`ClientTransport`] (send request `id`, poll for
//!    responses without blocking); the benchmark supplies a
//!    [`ResponseChecker`] that decides whether each response is correct.
//! 3. [`run`] drives one schedule and returns a [`RunReport`]: verified,
//!    mismatched and lost requests counted separately, HDR latency
//!    percentiles and achieved throughput with warm-up excluded, merged over
//!    threads.
//! 4. [`sweep`] repeats runs over offered loads; [`summarize`] reports the
//!    highest load achieved within 95 % of offered per mode. [`search::search`] finds that
//!    load robustly on a noisy machine: the median of K trials per load, a coarse grid then
//!    bisection, stopping only on a sustained miss, modes interleaved trial by trial.
//! 5. [`Record`]s go to JSON ([`write_json`]) and to throughput–p99 plots
//!    ([`plot_p99_curves`]); grids of ratios to heatmaps ([`plot_heatmap`]).
//!
//! Whether a trial can be trusted: [`interference`] measures other processes' time on the
//! bench's CPUs during it, and [`canary`] times fixed work on each of those CPUs just before
//! it, judged against the run's own fast readings, for a machine that slows down by itself.
//!
//! ```
//! use loadgen::fake::{check_echo, FakeEchoServer, FaultPlan};
//! use loadgen::{run, Bound, RunConfig, Schedule, ScheduleConfig};
//!
//! let server = FakeEchoServer::start(FaultPlan::default());
//! let schedule = Schedule::poisson(&ScheduleConfig {
//!     rate_rps: 50_000.0,
//!     bound: Bound::Count(500),
//!     threads: 2,
//!     seed: 1,
//! })
//! .unwrap();
//! let report = run(&schedule, &RunConfig::default(), |_| server.connect(), &check_echo).unwrap();
//! assert_eq!(report.counters.verified, 500);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod args;
mod bars;
pub mod canary;
mod crew;
pub mod fake;
mod heatmap;
pub mod interference;
mod latency_plot;
pub mod payload_hash;
mod plot;
mod record;
mod run;
mod schedule;
pub mod search;
mod stats;
mod sweep;
mod transport;

pub use bars::{bars_from_records, bars_size, plot_bars, Bar, BarChart, BARS_WIDTH};
pub use crew::{Crew, Job, Member, SharedChecker};
pub use heatmap::{plot_heatmap, Heatmap};
pub use latency_plot::{lower_envelope, plot_latency, LATENCY_SIZE};
pub use payload_hash::{payload_hash, PayloadHasher};
pub use plot::{plot_p99_curves, PlotError, PLOT_SIZE};
pub use record::{
    fmt_us, from_json, merge_hosts, read_json, save_bench_records, save_json, to_json, write_json,
    Record,
};
pub use run::{run, RunConfig, RunError, RunReport};
pub use schedule::{
    request_id, split_request_id, Bound, Schedule, ScheduleConfig, ScheduleError, SeededRng,
    ThreadSchedule, ID_SEQ_BITS, MAX_REQUESTS,
};
pub use stats::Counters;
pub use sweep::{
    linear_loads, max_kept_up, max_kept_up_within_p99, summarize, sweep, ModePoints, ModeSummary,
    SweepConfig, DEFAULT_KEEP_UP,
};
pub use transport::{ClientTransport, Response, ResponseChecker};
