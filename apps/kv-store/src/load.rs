//! Loading a store with a workload's keys (the store side of a benchmark or a `kv server
//! --workload`).

use std::time::Instant;

use std::path::PathBuf;

use cli_args::Args;
use kv_workloads::{
    CdnConfig, GoogleConfig, TwitterConfig, WorkloadConfig, YcsbAccess, YcsbConfig,
};

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

/// The workload `name` (`ycsb`, `google`, `twitter` or `cdn`) with its options taken from `a`
/// (`--keys N`; ycsb `--shape COUNTxSIZE --access getm|getlist`; google `--list-lens MIN-MAX
/// --no-resample`; twitter `--trace PATH`; cdn `--total-mb N --piece-size BYTES`): the
/// workload flags of `kv bench | server | client` and `demi-server kv`.
pub fn workload_from_args(a: &mut Args, name: &str) -> Result<WorkloadConfig, String> {
    let keys = a.parse::<u64>("--keys")?;
    Ok(match name {
        "ycsb" => {
            let access = match a.take("--access")?.as_deref() {
                None | Some("getm") => YcsbAccess::GetM,
                Some("getlist") => YcsbAccess::GetList,
                Some(o) => return Err(format!("--access {o:?}: getm or getlist")),
            };
            let mut c = match a.take("--shape")? {
                Some(s) => YcsbConfig::with_shape(&s, access).map_err(|e| e.to_string())?,
                None => YcsbConfig {
                    access,
                    ..YcsbConfig::default()
                },
            };
            c.keys = keys.unwrap_or(c.keys);
            WorkloadConfig::Ycsb(c)
        }
        "google" => {
            let mut c = match a.take("--list-lens")? {
                Some(l) => {
                    GoogleConfig::with_list_lens(&l).map_err(|e| format!("--list-lens {e}"))?
                }
                None => GoogleConfig::default(),
            };
            if a.switch("--no-resample") {
                c.resample_over_frame = false;
            }
            c.keys = keys.unwrap_or(c.keys);
            WorkloadConfig::Google(c)
        }
        "twitter" => {
            let mut c = TwitterConfig::default();
            c.trace = a.take("--trace")?.map(PathBuf::from);
            c.keys = keys.unwrap_or(c.keys);
            WorkloadConfig::Twitter(c)
        }
        "cdn" => {
            let mut c = CdnConfig::default();
            if let Some(mb) = a.parse::<u64>("--total-mb")? {
                c.total_bytes = mb << 20;
            }
            if let Some(p) = a.parse::<usize>("--piece-size")? {
                c.piece_size = p;
            }
            WorkloadConfig::Cdn(c)
        }
        other => {
            return Err(format!(
                "unknown workload {other:?} (ycsb, google, twitter or cdn)"
            ))
        }
    })
}
