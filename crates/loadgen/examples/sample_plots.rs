//! Draws every chart the benches draw from synthetic inputs shaped like an echo run (eleven
//! modes, a noisy tail at low loads, saturated points above each mode's capacity), so the
//! pictures can be looked at without running a bench:
//!
//! ```sh
//! cargo run -p loadgen --example sample_plots -- /tmp/plots
//! ```
//! writes `bars.{svg,png}`, `latency.{svg,png}` and `heatmap.{svg,png}` there.

use std::path::PathBuf;

use loadgen::{plot_bars, plot_heatmap, plot_latency, Bar, BarChart, Heatmap, Record};

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "plots".to_owned()),
    );
    std::fs::create_dir_all(&dir).expect("output directory");
    let modes: [(&str, f64, &str); 11] = [
        ("raw", 2618e3, "device"),
        ("zero-copy", 2526e3, "device"),
        ("one-copy", 1445e3, "device"),
        ("two-copy", 1382e3, "server"),
        ("cornflakes", 2505e3, "device"),
        ("cornflakes-sg", 2379e3, "device"),
        ("cornflakes-copy", 1745e3, "device"),
        ("cornflakes-no-ssend", 2514e3, "device"),
        ("protobuf", 1401e3, "server"),
        ("capnp", 841e3, "server"),
        ("flatbuffers", 1376e3, "server"),
    ];
    let chart = BarChart {
        title: "echo list-2x2048, server core with an emulated ConnectX: highest load kept up"
            .to_owned(),
        bars: modes
            .iter()
            .map(|&(m, rps, bound)| Bar {
                label: m.to_owned(),
                rps,
                spread: Some((rps * 0.96, rps * 1.02)),
                bound: bound.to_owned(),
                line_rate_rps: Some(2_975_000.0),
            })
            .collect(),
        references: vec![("raw".to_owned(), 2618e3)],
        spread_means: "min–max of the best load's trials".to_owned(),
    };
    plot_bars(&chart, &dir.join("bars.svg"), &dir.join("bars.png")).expect("bars");

    // A deterministic stream of noise.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut noise = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1000) as f64 / 1000.0
    };
    let mut recs = Vec::new();
    for &(m, cap, _) in &modes {
        let mut load = 125e3;
        while load <= 8e6 {
            let u = load / cap;
            let kept = u < 1.0;
            let base = 20.0 / (1.0 - u.min(0.97));
            // Low loads: now and then a descheduled trial's p99 of milliseconds.
            let spike = if noise() < 0.2 { 200.0 } else { 1.0 };
            recs.push(Record {
                mode: m.to_owned(),
                shape: "list-2x2048".to_owned(),
                offered_rps: load,
                achieved_rps: if kept { load } else { cap },
                p50_us: Some(base * (1.0 + 0.2 * noise())),
                p99_us: Some(3.0 * base * spike * (1.0 + noise())),
                ..Record::default()
            });
            load *= if load < cap { 2.0 } else { 1.5 };
        }
    }
    plot_latency(
        &recs,
        "echo list-2x2048, server core with an emulated ConnectX: latency up to saturation",
        0.95,
        &dir.join("latency.svg"),
        &dir.join("latency.png"),
    )
    .expect("latency");

    let sizes = [64usize, 128, 256, 512, 1024, 2048, 4096];
    let counts = [1usize, 2, 4, 8, 16];
    let h = Heatmap {
        title: "sg vs copy saturation load (medians), server core with an emulated ConnectX on a \
                second core; threshold 512 B"
            .to_owned(),
        x_desc: "segment size S (bytes)".to_owned(),
        y_desc: "segments per response K".to_owned(),
        x_labels: sizes.iter().map(usize::to_string).collect(),
        y_labels: counts.iter().map(usize::to_string).collect(),
        values: counts
            .iter()
            .map(|&k| {
                sizes
                    .iter()
                    .map(|&s| Some((s as f64 / 512.0).powf(0.3) * (1.0 + k as f64 / 40.0)))
                    .collect()
            })
            .collect(),
        mark_column: Some(3),
    };
    plot_heatmap(&h, &dir.join("heatmap.svg"), &dir.join("heatmap.png")).expect("heatmap");
    println!(
        "wrote {}/{{bars,latency,heatmap}}.{{svg,png}}",
        dir.display()
    );
}
