//! Loading a store with a workload's keys (the store side of a benchmark or a `kv server
//! --workload`).

use std::time::Instant;

use kv_workloads::WorkloadConfig;

use crate::store::Store;

/// Loads the store with the workload `cfg` describes (run on the server's thread). A store
/// that is one core's shard ([`Store::set_shard`]) gets only that core's keys.
pub fn load_store(cfg: &WorkloadConfig, store: &mut Store) -> Result<String, String> {
    let start = Instant::now();
    let w = cfg.build().map_err(|e| e.to_string())?;
    let mut keys = 0usize;
    let mut bytes = 0usize;
    let shard = store.shard();
    for (k, vals) in w.load() {
        if shard.is_some_and(|(core, cores)| crate::steer::core_of(&k, cores) != core) {
            continue;
        }
        let refs: Vec<&[u8]> = vals.iter().map(Vec::as_slice).collect();
        bytes += refs.iter().map(|v| v.len()).sum::<usize>();
        store
            .put_list(&k, &refs)
            .map_err(|s| format!("key {k:?}: {}", s.as_str_name()))?;
        keys += 1;
    }
    Ok(format!(
        "loaded {} keys, {:.1} MB of values, in {:.1} s",
        keys,
        bytes as f64 / 1e6,
        start.elapsed().as_secs_f64()
    ))
}
