//! The memory limit once charged about a fifth of what an entry costs (72 B charged against
//! ~366 B of resident memory per empty value with an 8-byte key). The store charges the key's
//! and the list's heap blocks, the value's pinned size class and reference count, and the hash
//! table's slots (`src/cost.rs`); this compares the charge with the resident memory the
//! process really gained, within 20 % either way. One test per binary: nothing else runs in
//! this process while it measures.
//!
//! Where it measures: resident memory moves in steps the charge does not follow, so the
//! counts are chosen where those steps are small beside the whole. The hash table doubles at
//! each growth point (`cost::capacity_for`): the counts sit three quarters of the way from one
//! growth to the next, for two table sizes. Pinned memory is mapped in 2 MiB chunks, the first
//! already resident when the store starts and the last one partly used: at 100 000 entries
//! and more those are a few percent (at 25 000 they alone moved the ratio to 1.25).

use cornflakes::PinnedMemory;
use kv_store::cost;
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

/// The entry counts measured: three quarters of the way from one growth of the hash table to
/// the next, for the table that holds 100 000 entries and the one twice its size.
fn counts() -> [usize; 2] {
    [100_000, 200_000].map(|target| {
        // The capacity the table grows to for `target` entries; it grew at half of that.
        let next = cost::capacity_for(target);
        let last = next / 2;
        assert!(
            last < target && target <= next,
            "{last} < {target} <= {next}"
        );
        let n = last + (next - last) * 3 / 4;
        assert_eq!(
            cost::capacity_for(n),
            next,
            "{n} entries: no growth in between"
        );
        n
    })
}

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
    if let Ok(case) = std::env::var(CASE) {
        let mut it = case.split(',');
        let n: usize = it.next().unwrap().parse().unwrap();
        let val_len: usize = it.next().unwrap().parse().unwrap();
        let append = it.next() == Some("append");
        let (charged, resident) = measure(n, val_len, append).unwrap();
        println!("RESULT {charged} {resident}");
        return;
    }
    println!("entries  value  charged/entry  resident/entry  ratio");
    let cases = [
        (0, false),
        (16, false),
        (100, false),
        (16, true),
        (600, false),
    ];
    let [smaller, larger] = counts();
    // 600-byte values (a 1 KiB size class) at the smaller count only: 200 MB more at the larger.
    let runs = cases.iter().map(|&c| (smaller, c));
    for (n, (val_len, append)) in runs.chain(cases[..4].iter().map(|&c| (larger, c))) {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_charge_matches_the_memory_entries_really_take",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CASE,
                format!("{n},{val_len},{}", if append { "append" } else { "put" }),
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
        assert!(
            (0.8..=1.2).contains(&ratio),
            "{n} entries of {val_len}-byte values: charged {charged} B for {resident} B \
             resident ({ratio:.2})"
        );
    }
}
