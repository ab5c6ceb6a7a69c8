//! Instructions per message for the benchmark matrix, counted by callgrind, in one table.
//!
//! ```sh
//! cargo run --release -p benches --bin count                  # every shape (a few minutes)
//! cargo run --release -p benches --bin count -- 1x64 2x2048   # some shapes
//! ```
//!
//! The table's Cornflakes cells build from the store's handles (as the KV server does); one
//! cell, from slices of the values (pointer recovery) and/or the cold store:
//! `BENCHES_COUNT_CELL="cf-hybrid serialize 4x1024 320 slices"` (or `… cold`, `… cold slices`)
//! under the same valgrind command (see `run_cell`).
//!
//! For each (shape, library, operation) the binary runs itself twice under
//! `valgrind --tool=callgrind --toggle-collect='*as benches::Lib>::OP'` with the glibc tunables
//! that keep `memcpy`/`memset` on their vector loops (so counts track bytes), once for
//! [`SHORT`] and once for [`LONG`] messages with hot values in pinned memory; instructions per
//! message = (Ir(LONG) − Ir(SHORT)) / (LONG − SHORT), so one-off costs (first allocations)
//! cancel. Only the measured function and its callees are counted, not the harness.

use std::process::{Command, ExitCode};

use benches::{library_built, received, tx_buffer, Build, Shape, Store, Temp, LIBRARY_NAMES};

/// Messages in the short and the long run.
const SHORT: usize = 64;
const LONG: usize = 320;

const TUNABLES: &str = "glibc.cpu.x86_rep_stosb_threshold=1073741824:\
                        glibc.cpu.x86_rep_movsb_threshold=1073741824";

/// The environment variable that makes the binary run one cell instead of the driver.
const CELL: &str = "BENCHES_COUNT_CELL";

/// Runs one cell: `lib op shape n`, then optionally `cold` for the cold store (values at
/// random places in [`COLD_BYTES`](benches::COLD_BYTES) of pinned memory) and `slices` for a
/// Cornflakes library building from slices of the values (pointer recovery,
/// [`Build::Slices`]) instead of their handles. The driver's table is hot and from handles;
/// the other cells are for reading one path by hand.
fn run_cell(spec: &str) -> Result<(), String> {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    let (lib, op, shape, n, options) = match parts[..] {
        [lib, op, shape, n, ref options @ ..] => (lib, op, shape, n, options),
        _ => return Err(format!("bad {CELL} {spec:?}")),
    };
    let (mut temp, mut build) = (Temp::Hot, Build::Handles);
    for &o in options {
        match o {
            "cold" => temp = Temp::Cold,
            "slices" if lib.starts_with("cf-") => build = Build::Slices,
            "slices" => return Err(format!("{lib} has one build; `slices` is for cf-*")),
            _ => {
                return Err(format!(
                    "bad option {o:?} in {CELL} {spec:?} (cold, slices)"
                ))
            }
        }
    }
    let shape: Shape = shape.parse()?;
    let n: usize = n.parse().map_err(|_| format!("bad count {n:?}"))?;
    let store = Store::new(shape, temp);
    let mut lib =
        library_built(lib, &store.mem, build).ok_or_else(|| format!("unknown library {lib:?}"))?;
    let mut total = 0usize;
    match op {
        "serialize" => {
            let mut tx = tx_buffer();
            for i in 0..n {
                total += lib.serialize(&store, store.msg(i), &mut tx);
                lib.after();
            }
        }
        "deserialize" => {
            let rx = received(lib.as_mut(), &store, temp);
            for i in 0..n {
                total += lib.deserialize(shape, &rx[i % rx.len()]);
                lib.after();
            }
        }
        other => return Err(format!("unknown operation {other:?}")),
    }
    println!("{total}");
    Ok(())
}

/// Total instructions callgrind collected for one run of a cell.
fn collected(lib: &str, op: &str, shape: Shape, n: usize) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::env::temp_dir().join(format!(
        "benches-count-{}-{lib}-{op}-{shape}-{n}.cg",
        std::process::id()
    ));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(format!("--toggle-collect=*as benches::Lib>::{op}"))
        .arg(&exe)
        .env("GLIBC_TUNABLES", TUNABLES)
        .env(CELL, format!("{lib} {op} {shape} {n}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("running valgrind: {e} (install it: apt-get install valgrind)"))?;
    if !status.success() {
        return Err(format!("valgrind on {lib} {op} {shape} failed ({status})"));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no totals in callgrind output for {lib} {op} {shape}"))
}

fn per_message(lib: &str, op: &str, shape: Shape) -> Result<f64, String> {
    let short = collected(lib, op, shape, SHORT)?;
    let long = collected(lib, op, shape, LONG)?;
    Ok(long.saturating_sub(short) as f64 / (LONG - SHORT) as f64)
}

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var(CELL) {
        return match run_cell(&spec) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shapes: Vec<Shape> = if args.is_empty() {
        Shape::all()
    } else {
        match args.iter().map(|a| a.parse()).collect() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        }
    };
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("valgrind not found: apt-get install valgrind");
        return ExitCode::FAILURE;
    }
    println!("Instructions per message (callgrind; hot values in pinned memory; (Ir({LONG}) - Ir({SHORT})) / {})\n", LONG - SHORT);
    for op in ["serialize", "deserialize"] {
        println!("| {op} | {} |", LIBRARY_NAMES.join(" | "));
        println!("|---|{}", "---:|".repeat(LIBRARY_NAMES.len()));
        for &shape in &shapes {
            let mut row = format!("| {shape} |");
            for lib in LIBRARY_NAMES {
                if op == "serialize" && lib == "cf-view" {
                    // cf-view serializes through cf-hybrid's `Lib::serialize`, a nested
                    // `--toggle-collect` match that would switch the count off inside it.
                    row.push_str(" = cf-hybrid |");
                    continue;
                }
                match per_message(lib, op, shape) {
                    Ok(v) => row.push_str(&format!(" {v:.0} |")),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            println!("{row}");
        }
        println!();
    }
    ExitCode::SUCCESS
}
