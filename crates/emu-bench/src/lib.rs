//! # emu-bench: the server core's throughput, with an emulated NIC on a second core
//!
//! The paper measures every serialization mode with one server core saturated behind a
//! 100 Gbit/s NIC. This crate reproduces that setup on any Linux box with two cores: the server
//! runs the real ConnectX driver ([`datapath_mlx5::Mlx5Datapath`]) on one core, and the
//! emulated ConnectX ([`datapath_mlx5::emu::threaded::EmuDevice`]) runs on another, where it
//! also plays the wire and the clients ([`LoadWire`]):
//!
//! - requests are **prepared frames** (built once from the caller's payloads), injected into
//!   the server's receive queue at open-loop Poisson times ([`loadgen::Schedule`]): an
//!   injection is one frame copy plus a message-id patch, never a serialization;
//! - every reply the server sends is matched to its request by message id, its latency (from
//!   the *scheduled* send time) goes into an HDR histogram ([`latency::LatencyHistogram`]),
//!   every reply is read whole and its headers, length, message type and id are checked; its
//!   payload is checked for a seeded random 1 in [`EmuRunConfig::check_every`] (default
//!   [`DEFAULT_CHECK_EVERY`]) and for every reply that must be (writes, the first reply of
//!   every distinct request, its first in the measured window): hashed where the send
//!   descriptors lie and, when it differs from the last accepted reply (or for a random 1 in
//!   [`EmuRunConfig::sample_every`]), given to the caller's [`ReplyCheck`]; the coverage is
//!   in every report ([`EmuReport::coverage_note`]);
//! - the device thread reports how busy it was, so every result says whether the server or
//!   the device saturated ([`EmuReport::bottleneck`]);
//! - [`run_cores`] runs **N server cores** (`EmuRunConfig::cores`): one queue set of the
//!   device per core, steered by destination UDP port (`7000 + i`), one pinned server thread
//!   per core calling the caller's server closure with its own [`ServerPort`] (its own memory,
//!   datapath and state: nothing shared), each request sent to its [`Request::core`] and its
//!   reply checked to come from that core; per-core results and device counters in
//!   [`EmuReport::per_core`]. It needs N + 1 CPUs ([`cores_for`]); `pin: false` runs the
//!   plumbing on fewer, for tests only (its numbers mean nothing);
//! - [`resident`] keeps the server cores' threads for a series of runs: each core builds its
//!   state once (e.g. a key-value store loaded into its pinned memory) and every
//!   [`Resident::run`] calls the run's job with that state and a fresh [`ServerPort`] of the
//!   run's device, so a state that takes longer to build than a run is built once per search;
//! - a benchmark searches each mode's saturation load with [`search_rerunning_slowed`]
//!   ([`loadgen::search`]: median of K trials per load, grid then bisection, modes
//!   interleaved; a trial whose speed canary read the machine's slow state rerun up to
//!   `--slowed-retries` times, not counted) over [`EmuTrial`]s, and reports
//!   it with [`EmuSummary`] and [`table`]: the highest load kept up, the spread of its trials,
//!   p99, device utilisation, the 100 GbE line rate of its frames
//!   ([`EmuReport::line_rate_rps`]), server handling time and what bounded it ([`Bound`]);
//! - [`EmuBench`] is that bench's skeleton: an app gives its server cores, its lanes' names and
//!   a closure running one trial at a point (its requests, checker, servers and seeds); the
//!   skeleton checks the CPUs, warns of a busy machine, prints the budget line, runs the
//!   search `--repeat` times with slowed trials rerun, rebases the canaries, and returns the
//!   summaries, trials, median records and each lane's server counters ([`EmuBenchRun`]);
//!   [`write_emu_outputs`] writes `emu-summary.json`, `emu-points.json` and `ratios.json` and
//!   gives the full tables and the text to print;
//! - [`SearchReport`] is a search's report when it ran in another program (the C library's
//!   emulated device writes it, a bench driving that program reads it back): one type for
//!   both sides.
//!
//! What this measures is the **server core's** work per request with a NIC that costs it
//! nothing but descriptor writes and completion polls. It is not a network measurement: see
//! `crates/datapath-mlx5/README.md` for what the model leaves out.
//!
//! ```no_run
//! use std::sync::atomic::Ordering;
//! use cornflakes::datapath::{Receive, Transmit, Completions};
//! use cornflakes::PinnedMemory;
//! use emu_bench::{run, EmuRunConfig, Request};
//!
//! let requests: Vec<Request> = (0..64u8)
//!     .map(|i| Request::new(1, vec![i; 100]))
//!     .collect();
//! let expected: Vec<Vec<u8>> = requests.iter().map(|r| r.payload.clone()).collect();
//! let cfg = EmuRunConfig { rate_rps: 200_000.0, ..EmuRunConfig::default() };
//! let (report, echoed) = run(
//!     &cfg,
//!     &requests,
//!     // Called for sampled replies: request index, reply payload.
//!     move |i: usize, reply: &[u8]| {
//!         if reply == expected[i] { Ok(()) } else { Err(format!("request {i}: wrong echo")) }
//!     },
//!     // Runs on the server core until told to stop.
//!     |port| {
//!         let mem = PinnedMemory::new(port.memory_config()).unwrap();
//!         let mut dp = port.datapath(mem).unwrap();
//!         let mut rx = Vec::new();
//!         let mut n = 0u64;
//!         while !port.stopped() {
//!             rx.clear();
//!             dp.recv_burst(&mut rx).unwrap();
//!             for m in &rx {
//!                 if dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data)).is_ok() {
//!                     n += 1;
//!                 }
//!             }
//!             dp.flush().unwrap();
//!             dp.poll_completions();
//!         }
//!         n
//!     },
//! )
//! .unwrap();
//! println!("{:.0} req/s, p99 {:?} us, device busy {:.0} %, {}", report.run.achieved_rps,
//!          report.run.latency.p99_us(), report.device_busy * 100.0, report.bottleneck());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bench;
mod capture;
mod compact;
mod explain;
mod frames;
mod headline;
mod plan_report;
mod repeats;
mod rerun;
mod resident;
mod run;
mod search;
mod slowed;
mod summary_json;
mod wire;

pub use bench::{
    interference_warning, write_emu_outputs, About, EmuBench, EmuBenchRun, EmuRepeat,
    EmuReportSpec, EmuTexts,
};
pub use capture::{capture, CaptureDatapath};
pub use compact::compact_table;
pub use explain::{device_note, split_cell, split_json};
pub use headline::{
    median_min_max, ratios, Floor, Headlines, Ratio, RatioKind, RatioSpread, Roles,
};
pub use repeats::{
    by_repeat, detail_tables, kept_up_chart, summaries_json, summary_text, write_charts, EmuOutcome,
};
/// The flags of the emulated device every emu bench takes (`echo bench`, `kv bench`): what
/// was given of `--sample-every N` (every n-th checked reply decoded again; 0 reads as 1),
/// `--check-every N` (a random 1 in N of the other replies' payloads checked; 0 reads as 1),
/// `--desc-ns NS` (the device's time per gather entry), `--demote-lines N` (request cache
/// lines demoted after each write), `--slowed-retries N` (reruns of a trial whose speed
/// canary read the machine's slow state) and `--repeat N` (the whole search N times).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmuFlags {
    /// `--sample-every N`, at least 1.
    pub sample_every: Option<u64>,
    /// `--check-every N`, at least 1.
    pub check_every: Option<u64>,
    /// `--desc-ns NS`.
    pub desc_ns: Option<u64>,
    /// `--demote-lines N`.
    pub demote_lines: Option<usize>,
    /// `--slowed-retries N`: reruns of a trial whose speed canary read slowed
    /// ([`search_rerunning_slowed`]; default [`DEFAULT_SLOWED_RETRIES`], 0: none).
    pub slowed_retries: Option<usize>,
    /// `--repeat N`: the whole interleaved search run N times in one invocation, each ratio
    /// the median of the repeats' ([`Headlines`]); at least 1.
    pub repeat: Option<usize>,
}

impl EmuFlags {
    /// Reads the flags from `a`.
    pub fn from_args(a: &mut cli_args::Args) -> Result<EmuFlags, String> {
        Ok(EmuFlags {
            sample_every: a.parse::<u64>("--sample-every")?.map(|n| n.max(1)),
            check_every: a.parse::<u64>("--check-every")?.map(|n| n.max(1)),
            desc_ns: a.parse::<u64>("--desc-ns")?,
            demote_lines: a.parse::<usize>("--demote-lines")?,
            slowed_retries: a.parse::<usize>("--slowed-retries")?,
            repeat: match a.parse::<usize>("--repeat")? {
                Some(0) => return Err("--repeat must be at least 1".to_owned()),
                r => r,
            },
        })
    }
}

/// What an emulated-NIC bench runs with (`echo bench`, `kv bench`): its [`EmuFlags`] and the
/// search's `--trials K` and `--resolution F` over their defaults. One home for the settings
/// every such bench shares, and for the [`EmuRunConfig`] a trial of it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct EmuSettings {
    /// Every n-th checked reply is decoded again, not compared by its hash
    /// ([`EmuRunConfig::sample_every`]).
    pub sample_every: u64,
    /// A random 1 in N of the other replies' payloads is checked
    /// ([`EmuRunConfig::check_every`]; 1: every reply).
    pub check_every: u64,
    /// The device's time per gather entry (descriptor), nanoseconds (0: free; the paper's
    /// crossover comes from CPU-side costs, §5.2).
    pub desc_ns: u64,
    /// Leading cache lines of each request frame the device demotes to the last-level cache
    /// after writing it, as DDIO leaves DMA writes there (0: none).
    pub demote_lines: usize,
    /// Reruns of a trial whose speed canary read the machine's slow state
    /// ([`search_rerunning_slowed`]; 0: none).
    pub slowed_retries: usize,
    /// Trials per load of the saturation search (its median decides).
    pub trials: usize,
    /// The search bisects until the saturation bracket is within this fraction.
    pub resolution: f64,
    /// How many times the whole interleaved search runs; each headline ratio is the median of
    /// the repeats' ([`Headlines`]).
    pub repeat: usize,
}

impl Default for EmuSettings {
    fn default() -> Self {
        EmuSettings {
            sample_every: 64,
            check_every: DEFAULT_CHECK_EVERY,
            desc_ns: 0,
            demote_lines: 0,
            slowed_retries: DEFAULT_SLOWED_RETRIES,
            trials: loadgen::search::DEFAULT_TRIALS,
            resolution: loadgen::search::DEFAULT_RESOLUTION,
            repeat: 1,
        }
    }
}

impl EmuSettings {
    /// Takes [`EmuFlags`] and the search's flags from `a`, over these settings.
    pub fn apply_args(&mut self, a: &mut cli_args::Args) -> Result<(), String> {
        let f = EmuFlags::from_args(a)?;
        self.sample_every = f.sample_every.unwrap_or(self.sample_every);
        self.check_every = f.check_every.unwrap_or(self.check_every);
        self.desc_ns = f.desc_ns.unwrap_or(self.desc_ns);
        self.demote_lines = f.demote_lines.unwrap_or(self.demote_lines);
        self.slowed_retries = f.slowed_retries.unwrap_or(self.slowed_retries);
        self.repeat = f.repeat.unwrap_or(self.repeat);
        loadgen::args::SearchFlags::from_args(a)?.apply(&mut self.trials, &mut self.resolution);
        Ok(())
    }

    /// A trial at `rate_rps` with `seed`, lasting `duration` after `warmup`, a reply later than
    /// `timeout` lost: the device's settings from these, everything else
    /// [`EmuRunConfig::default`]'s.
    pub fn run_config(
        &self,
        rate_rps: f64,
        seed: u64,
        (duration, warmup, timeout): (
            std::time::Duration,
            std::time::Duration,
            std::time::Duration,
        ),
    ) -> EmuRunConfig {
        let mut c = EmuRunConfig {
            rate_rps,
            duration,
            warmup,
            timeout,
            seed,
            sample_every: self.sample_every,
            check_every: self.check_every,
            delay_per_segment: std::time::Duration::from_nanos(self.desc_ns),
            ..EmuRunConfig::default()
        };
        c.emu.demote_lines = self.demote_lines;
        c
    }
}

/// Whether this machine has the N + 1 CPUs an N-core run needs (N servers, one device), and
/// which.
pub use datapath_mlx5::emu::threaded::cores_for;
/// Whether this machine has the two CPUs a one-core run needs (server and device), and which.
pub use datapath_mlx5::emu::threaded::two_cores;
pub use frames::{Request, RequestFrames};
pub use plan_report::{RepeatReport, SearchReport, ThreadReading};
pub use rerun::{search_rerunning_slowed, DEFAULT_SLOWED_RETRIES};
pub use resident::{resident, Resident};
pub use run::{
    memory_config, run, run_cores, Bottleneck, CoreReport, EmuReport, EmuRunConfig, ServerPort,
    DEFAULT_CHECK_EVERY, DEVICE_SATURATED, ETHERNET_WIRE_OVERHEAD, LINE_RATE_GBPS,
};
pub use search::{
    control_line, control_note, median_records, rebase_canaries, replies_verified, table,
    trials_json, Bound, EmuSummary, EmuTrial, LoadSummary, PAPER_CONTROL,
};
pub use slowed::SlowedRun;
pub use wire::{LoadWire, ReplyCheck, MAX_FAILURES_KEPT};
