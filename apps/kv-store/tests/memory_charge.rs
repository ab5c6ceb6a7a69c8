//! Issue 24, fault 4: the memory limit charged about a fifth of what an entry costs (72 B
//! charged against ~366 B of resident memory per empty value with an 8-byte key). The store
//! now charges the key's and the list's heap blocks, the value's pinned size class and
//! reference count, and the hash table's slots (`src/cost.rs`); this compares the charge
//! with the resident memory the process really gained. One test per binary: nothing else
//! runs in this process while it measures.

use cornflakes::PinnedMemory;
use kv_store::server::memory_config;
use kv_store::store::{Store, StoreConfig};

/// Resident bytes of this process (`/proc/self/statm`, pages of 4 KiB).
fn rss() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Fills a store with `n` entries of `val_len`-byte values under 8-byte keys and returns
/// (bytes charged, resident bytes gained).
fn measure(n: usize, val_len: usize, append: bool) -> Option<(usize, usize)> {
    let mem = PinnedMemory::new(memory_config(16 * 1024, 1 << 30)).ok()?;
    let mut s = Store::new(&mem, StoreConfig::default());
    let val = vec![7u8; val_len];
    let keys: Vec<String> = (0..n).map(|i| format!("{i:08}")).collect();
    let before = rss()?;
    for k in &keys {
        if append {
            s.append(k, &val).unwrap();
            s.append(k, &val).unwrap();
        } else {
            s.put(k, &val).unwrap();
        }
    }
    let after = rss()?;
    let charged = s.stats().used_bytes;
    Some((charged, after.saturating_sub(before)))
}

const CASE: &str = "MEMORY_CHARGE_CASE";

/// Each case runs in a fresh child process (this test binary again, with [`CASE`] set): the
/// memory a case frees stays resident and would hide the next case's growth.
#[test]
fn the_charge_matches_the_memory_entries_really_take() {
    if rss().is_none() {
        test_skip::skip(
            "the_charge_matches_the_memory_entries_really_take",
            "no /proc/self/statm",
        );
        return;
    }
    let n = 200_000;
    if let Ok(case) = std::env::var(CASE) {
        let (val_len, append) = case.split_once(',').unwrap();
        let (charged, resident) = measure(n, val_len.parse().unwrap(), append == "append").unwrap();
        println!("RESULT {charged} {resident}");
        return;
    }
    println!("entries  value  charged/entry  resident/entry  ratio");
    for (val_len, append) in [(0, false), (16, false), (100, false), (16, true)] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_charge_matches_the_memory_entries_really_take",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CASE,
                format!("{val_len},{}", if append { "append" } else { "put" }),
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("the child printed no result: {text}"));
        let v: Vec<usize> = line
            .split_whitespace()
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        let (charged, resident) = (v[0], v[1]);
        let ratio = charged as f64 / resident as f64;
        println!(
            "{n:>7}  {:>5}  {:>13}  {:>14}  {ratio:.2}",
            if append {
                format!("2x{val_len}")
            } else {
                val_len.to_string()
            },
            charged / n,
            resident / n
        );
        // The charge may round up (a table just grown, size classes), never charge much
        // less than what is resident.
        assert!(
            (0.85..=1.6).contains(&ratio),
            "{val_len}-byte values: charged {charged} B for {resident} B resident ({ratio:.2})"
        );
    }
}
