//! Prints what each workload generates with its default configuration (or the one named on
//! the command line): `cargo run --release -p kv-workloads --example describe -- [ycsb|google|twitter|cdn] [REQUESTS]`.

use kv_workloads::WorkloadConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = match args.first() {
        Some(n) => vec![n.as_str()],
        None => vec!["ycsb", "google", "twitter", "cdn"],
    };
    let count: usize = args
        .get(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(200_000);
    for name in names {
        let w = WorkloadConfig::default_for(name)?.build()?;
        let t = std::time::Instant::now();
        let (mut keys, mut bytes) = (0u64, 0u64);
        for (_, v) in w.load() {
            keys += 1;
            bytes += v.iter().map(|e| e.len() as u64).sum::<u64>();
        }
        let load_s = t.elapsed().as_secs_f64();
        let reqs = w.requests(count, 1);
        println!("{}", w.describe(&reqs));
        println!("  load set: {keys} keys, {bytes} value bytes (generated in {load_s:.2} s)\n");
    }
    Ok(())
}
