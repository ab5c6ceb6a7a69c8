//! Sweeps offered load against the in-memory fake echo server and writes
//! `fake_sweep.json`, `fake_sweep.svg` and `fake_sweep.png` into the directory
//! given as the first argument (default: the current directory).
//!
//! `cargo run --release -p loadgen --example fake_sweep -- /tmp/out`

use loadgen::fake::{check_echo, FakeEchoServer, FaultPlan};
use loadgen::{
    linear_loads, plot_p99_curves, run, summarize, sweep, write_json, Bound, RunConfig, Schedule,
    ScheduleConfig, SweepConfig, DEFAULT_KEEP_UP,
};
use std::path::PathBuf;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let mut records = Vec::new();
    for (mode, plan) in [
        ("fake-clean", FaultPlan::default()),
        (
            "fake-faulty",
            FaultPlan {
                drop_every: 100,
                corrupt_every: 0,
            },
        ),
    ] {
        let server = FakeEchoServer::start(plan);
        let cfg = SweepConfig {
            mode: mode.into(),
            shape: "32B".into(),
            loads_rps: linear_loads(50_000.0, 400_000.0, 8),
            keep_up: DEFAULT_KEEP_UP,
            stop_after_misses: 2,
            progress: true,
        };
        let run_cfg = RunConfig {
            warmup: Duration::from_millis(50),
            timeout: Duration::from_millis(200),
            busy_poll: false,
            progress: false,
        };
        records.extend(sweep(&cfg, |rate| {
            let schedule = Schedule::poisson(&ScheduleConfig {
                rate_rps: rate,
                bound: Bound::Duration(Duration::from_millis(300)),
                threads: 1,
                seed: 1,
            })?;
            Ok::<_, Box<dyn std::error::Error>>(run(
                &schedule,
                &run_cfg,
                |_| server.connect(),
                &check_echo,
            )?)
        })?);
    }
    for s in summarize(&records, DEFAULT_KEEP_UP) {
        println!("{s}");
    }
    write_json(&out.join("fake_sweep.json"), &records)?;
    plot_p99_curves(
        &records,
        "fake echo: p99 vs achieved load",
        &out.join("fake_sweep.svg"),
        &out.join("fake_sweep.png"),
    )?;
    Ok(())
}
