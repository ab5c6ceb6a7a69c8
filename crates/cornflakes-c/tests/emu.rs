//! `cf_dp_emu_new` called from Rust: this thread serves on the real mlx5 driver against the
//! emulated ConnectX while the device, on the second CPU, injects prepared requests at a fixed
//! open-loop load and checks the replies; then a server that lies, whose wrong replies the
//! device must catch. So `cargo test --all-features` covers the device's hand-over, plan and
//! report, and scripts/test.sh's nightly `-Zsanitizer=address` run (with `--features emu`)
//! checks the library's own code on it; tests/c/test_emu.c is the same from C. Without the
//! feature, the function must say how to build it.

use std::ffi::{CStr, CString};

use cornflakes_c::*;

fn last() -> String {
    // SAFETY: cf_last_error returns a valid NUL-terminated string owned by the library.
    unsafe { CStr::from_ptr(cf_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(not(feature = "emu"))]
#[test]
fn a_build_without_the_feature_says_how_to_build_it() {
    let dir = std::env::temp_dir();
    let dir = CString::new(dir.to_str().unwrap()).unwrap();
    let mut dp = cf_dp { id: 0 };
    assert_eq!(
        cf_dp_emu_new(dir.as_ptr(), &mut dp),
        cf_status::CF_ERR_UNSUPPORTED
    );
    assert_eq!(dp.id, 0);
    assert!(last().contains("--features emu"), "{}", last());
    // SAFETY: cf_dp_kinds returns a static NUL-terminated string.
    let kinds = unsafe { CStr::from_ptr(cf_dp_kinds()) }.to_string_lossy();
    assert!(!kinds.split(' ').any(|k| k == "emu"), "{kinds}");
}

#[cfg(feature = "emu")]
mod with_the_device {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use serde_json::{json, Value};

    use super::*;

    /// Distinct requests of the plan: payloads of 64 to 4 033 bytes.
    const DISTINCT: usize = 64;
    /// Requests per run and their rate: 0.3 s of arrivals.
    const REQUESTS: u64 = 3000;
    const RATE: u64 = 10_000;

    fn ok(s: cf_status) {
        assert_eq!(s, cf_status::CF_OK, "{}", last());
    }

    /// plan.bin and plan.json: echo checks, one fixed run (every payload checked when
    /// `check_every` is 1).
    fn write_plan(dir: &Path, check_every: u64) {
        place(dir, &echo_plan(dir, check_every));
    }

    /// plan.json, whole (renamed into place): the device starts the plan it first sees, so
    /// a plan is placed once, finished.
    fn place(dir: &Path, plan: &Value) {
        std::fs::write(dir.join(".plan.tmp"), plan.to_string()).unwrap();
        std::fs::rename(dir.join(".plan.tmp"), dir.join("plan.json")).unwrap();
    }

    /// Writes plan.bin and returns the echo plan over it: one fixed run, every
    /// `check_every`-th payload checked.
    fn echo_plan(dir: &Path, check_every: u64) -> Value {
        let mut blob = Vec::new();
        let mut requests = Vec::new();
        for i in 0..DISTINCT {
            let len = 64 + i * 63;
            let at = blob.len();
            blob.extend((0..len).map(|j| (i * 7 + j) as u8));
            requests.push(json!({"type": 3, "payload": [at, len], "expect": {"echo": true}}));
        }
        let plan = json!({
            "mode": "rust-echo",
            "shape": "echo",
            "check_every": check_every,
            // A functional test on a shared machine: a reply counts unless a second late.
            "timeout_ms": 1000,
            "fixed": {"rate_rps": RATE, "requests": REQUESTS},
            "requests": requests,
        });
        std::fs::write(dir.join("plan.bin"), blob).unwrap();
        plan
    }

    /// Serves until the plan is done, `handle` answering each request (its buffer released
    /// after). Returns how many it served.
    fn serve_with(dp: cf_dp, dir: &Path, mut handle: impl FnMut(&cf_rx)) -> u64 {
        let mut rx = vec![cf_rx::default(); 32];
        let mut served = 0u64;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dir.join("done").exists() {
            assert!(Instant::now() < deadline, "the plan did not finish in 60 s");
            let mut n = 0usize;
            ok(cf_dp_recv(dp, rx.as_mut_ptr(), rx.len(), &mut n));
            for r in &rx[..n] {
                handle(r);
                ok(cf_buf_release(r.data));
                served += 1;
            }
            if n > 0 {
                ok(cf_dp_flush(dp));
            }
        }
        served
    }

    /// Request `r`'s bytes (valid until its buffer is released).
    fn request_bytes(r: &cf_rx) -> &[u8] {
        let (mut p, mut len) = (std::ptr::null(), 0usize);
        ok(cf_buf_data(r.data, &mut p, &mut len));
        // SAFETY: cf_buf_data gave a pointer to `len` bytes that stay valid while the buffer
        // is held (`serve_with` releases it after the handler returns).
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// Answers `r` with a copy of `reply`.
    fn reply_copy(dp: cf_dp, r: &cf_rx, reply: &[u8]) {
        ok(cf_dp_send_copy(
            dp,
            r.conn,
            r.incarnation,
            r.msg_id,
            r.msg_type,
            reply.as_ptr(),
            reply.len(),
        ));
    }

    /// Serves until the plan is done: echoes each request by reference, or (when `lie`) every
    /// 50th by copy with one byte changed. Returns how many it served.
    fn serve(dp: cf_dp, dir: &Path, lie: bool) -> u64 {
        serve_with(dp, dir, |r| {
            if lie && r.msg_id % 50 == 0 {
                let mut copy = request_bytes(r).to_vec();
                let mid = copy.len() / 2;
                copy[mid] ^= 0x5a;
                reply_copy(dp, r, &copy);
            } else {
                ok(cf_dp_send_bufs(
                    dp,
                    r.conn,
                    r.incarnation,
                    r.msg_id,
                    r.msg_type,
                    &r.data,
                    1,
                ));
            }
        })
    }

    /// One echo plan on a fresh device: the report, and what this thread served.
    fn run(lie: bool) -> (Value, u64) {
        run_plan(
            if lie { "liar" } else { "honest" },
            |dir| write_plan(dir, if lie { 1 } else { 8 }),
            |dp, dir| serve(dp, dir, lie),
        )
    }

    /// Whether the machine has the two CPUs a device needs (server and device); if not, test
    /// `name` is skipped, saying why.
    fn two_cpus(name: &str) -> bool {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            test_skip::skip(
                name,
                &format!(
                    "the emulated ConnectX needs two CPUs (server and device); this has {cpus}"
                ),
            );
        }
        cpus >= 2
    }

    /// One device at a time: each pins a server and a device thread to this machine's CPUs,
    /// and two at once would take them from each other.
    static ONE_DEVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A plan (written by `plan`) on a fresh device, served by `serve`: the report, and what
    /// `serve` says it served.
    fn run_plan(
        tag: &str,
        plan: impl FnOnce(&Path),
        serve: impl FnOnce(cf_dp, &Path) -> u64,
    ) -> (Value, u64) {
        let _one = ONE_DEVICE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("cf-emu-rust-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let c = CString::new(dir.to_str().unwrap()).unwrap();
        let mut dp = cf_dp { id: 0 };
        ok(cf_dp_emu_new(c.as_ptr(), &mut dp));
        let mut kind = std::ptr::null();
        ok(cf_dp_kind(dp, &mut kind));
        // SAFETY: cf_dp_kind gave a static NUL-terminated string.
        assert_eq!(unsafe { CStr::from_ptr(kind) }.to_str().unwrap(), "emu");
        // Between trials there is nothing to receive, and no send is possible.
        let mut n = 7usize;
        let mut rx = [cf_rx::default()];
        ok(cf_dp_recv(dp, rx.as_mut_ptr(), 1, &mut n));
        assert_eq!(n, 0);
        assert_eq!(
            cf_dp_send_copy(dp, 0, 0, 1, 3, b"x".as_ptr(), 1),
            cf_status::CF_ERR_IO
        );
        assert!(last().contains("between trials"), "{}", last());
        plan(&dir);
        let served = serve(dp, &dir);
        let done = std::fs::read_to_string(dir.join("done")).unwrap();
        assert_eq!(done.trim(), "ok", "the plan failed");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        ok(cf_dp_release(dp));
        std::fs::remove_dir_all(&dir).unwrap();
        (report, served)
    }

    fn count(report: &Value, key: &str) -> u64 {
        report["trial"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no trial.{key} in {report:#}"))
    }

    /// Requests the device sent in the run (its one core's count).
    fn sent_of(report: &Value) -> u64 {
        report["trial"]["per_core"][0]["sent"]
            .as_u64()
            .unwrap_or_else(|| panic!("no trial.per_core[0].sent in {report:#}"))
    }

    #[test]
    fn a_server_on_the_emulated_connectx_is_checked_and_a_liar_caught() {
        if !two_cpus("a_server_on_the_emulated_connectx_is_checked_and_a_liar_caught") {
            return;
        }
        let (report, served) = run(false);
        let sent = sent_of(&report);
        // REQUESTS Poisson arrivals at RATE: within 5 %.
        let expected = REQUESTS as f64;
        assert!(
            (sent as f64 - expected).abs() < expected * 0.05,
            "{sent} sent"
        );
        assert_eq!(count(&report, "verified"), sent, "{report:#}");
        assert_eq!(count(&report, "mismatched"), 0, "{report:#}");
        assert_eq!(count(&report, "lost"), 0, "{report:#}");
        assert_eq!(report["coverage_complete"], json!(true), "{report:#}");
        assert_eq!(report["served_received"].as_u64(), Some(sent));
        assert_eq!(served, sent);
        // This thread's scheduling while it served: it spins, so it ran or waited to run
        // the whole span (within the kernel's accounting granularity).
        let t = &report["server_thread"];
        let span = t["span_ns"].as_u64().unwrap_or(0);
        assert!(span >= 200_000_000, "{t:#}");
        if let (Some(on), Some(waited)) = (t["on_cpu_ns"].as_u64(), t["waited_ns"].as_u64()) {
            let both = (on + waited) as f64;
            assert!(
                both > span as f64 * 0.8 && both < span as f64 * 1.05,
                "{t:#}"
            );
        }

        // Every 50th reply is wrong and every payload is checked: each one is caught.
        let (report, served) = run(true);
        let sent = sent_of(&report);
        let mismatched = count(&report, "mismatched");
        let wrong = sent / 50;
        assert!(
            mismatched + 2 >= wrong && mismatched <= wrong + 2,
            "{mismatched} mismatched of {sent}: {report:#}"
        );
        assert_eq!(
            count(&report, "verified") + mismatched + count(&report, "lost"),
            sent
        );
        assert_eq!(served, sent);
    }

    /// The echo plan of [`write_plan`] as a search instead of a fixed run: two loads well
    /// within an echo server's reach (a debug build's too), one trial each, the whole search
    /// twice. Only the search is ever placed: a fixed plan placed first could start before
    /// it was replaced.
    fn write_search_plan(dir: &Path) {
        let mut plan = echo_plan(dir, 8);
        let o = plan.as_object_mut().unwrap();
        o.remove("fixed");
        o.insert(
            "search".to_owned(),
            json!({"rates": [RATE / 10, RATE / 5], "trials": 1, "duration_ms": 100,
                   "warmup_ms": 20, "repeat": 2, "slowed_retries": 0}),
        );
        place(dir, &plan);
    }

    #[test]
    fn a_search_reports_each_repeat_and_writes_its_progress_to_a_file() {
        if !two_cpus("a_search_reports_each_repeat_and_writes_its_progress_to_a_file") {
            return;
        }
        let mut progress = String::new();
        let (report, served) = run_plan("search", write_search_plan, |dp, dir| {
            let served = serve(dp, dir, false);
            progress = std::fs::read_to_string(dir.join("progress.log")).unwrap_or_else(|e| {
                let done = std::fs::read_to_string(dir.join("done")).unwrap_or_default();
                panic!("no progress.log ({e}); the plan ended with: {done}")
            });
            served
        });
        assert_eq!(report["mode"], "rust-echo", "{report:#}");
        let repeats = report["repeats"].as_array().unwrap();
        let tables = report["tables"].as_array().unwrap();
        assert_eq!((repeats.len(), tables.len()), (2, 2), "{report:#}");
        let mut trials = 0;
        for (r, table) in repeats.iter().zip(tables) {
            assert_eq!(r["summary"]["mode"], "rust-echo", "{r:#}");
            // (Kept up or not: a functional test on a shared machine.)
            assert!(r["summary"].get("max_rps_within_95pct").is_some(), "{r:#}");
            assert!(table.as_str().unwrap().contains("rust-echo"), "{table}");
            // Each repeat's records and points as they are, untagged (one report per repeat).
            let records = r["records"].as_array().unwrap();
            let points = r["points"].as_array().unwrap();
            assert!(!records.is_empty() && !points.is_empty(), "{r:#}");
            assert!(records
                .iter()
                .chain(points)
                .all(|x| x.get("repeat").is_none()));
            // One scheduling reading per trial run, in the order they ran.
            let threads = r["server_thread"].as_array().unwrap();
            let loads = |v: &[Value]| -> Vec<f64> {
                v.iter()
                    .map(|x| x["offered_rps"].as_f64().unwrap())
                    .collect()
            };
            assert_eq!(loads(threads), loads(points), "{r:#}");
            trials += points.len();
        }
        assert!(served > 0);
        // The skeleton's lines went to progress.log: the budget line, each repeat's start,
        // every trial's progress line and the mode's bound per repeat.
        let lines: Vec<&str> = progress.lines().collect();
        assert!(
            lines[0].starts_with("[bench] 1 mode, shape echo: saturation search over"),
            "{progress}"
        );
        assert!(lines.contains(&"[bench] repeat 2 of 2"), "{progress}");
        let bounds = lines
            .iter()
            .filter(|l| l.starts_with("[bench] rust-echo: "))
            .count();
        assert_eq!(bounds, 2, "{progress}");
        assert_eq!(lines.len(), 1 + 2 + trials + bounds, "{progress}");
    }

    /// Keys of the key-value plan, each loaded with 300 bytes.
    const KV_KEYS: usize = 8;

    fn kv_value(key: usize, version: usize) -> Vec<u8> {
        (0..300)
            .map(|j| (key * 31 + version * 7 + j) as u8)
            .collect()
    }

    /// A key-value plan in RESP: 64 requests over 8 keys, a quarter SETs of a new value, the
    /// others GETs; every reply checked against what its key holds when it is handled.
    fn write_kv_plan(dir: &Path) {
        let mut blob = Vec::new();
        let at = |blob: &mut Vec<u8>, b: &[u8]| {
            let o = blob.len();
            blob.extend_from_slice(b);
            json!([o, b.len()])
        };
        let mut initial = serde_json::Map::new();
        for k in 0..KV_KEYS {
            let v = at(&mut blob, &kv_value(k, 0));
            initial.insert(format!("key{k}"), json!([v]));
        }
        let mut requests = Vec::new();
        for i in 0..DISTINCT {
            // Each cycle sets every key twice; gets visit every key.
            let k = if i % 4 == 1 {
                (i / 4) % KV_KEYS
            } else {
                (i * 5) % KV_KEYS
            };
            let key = format!("key{k}");
            let (cmd, expect) = if i % 4 == 1 {
                let val = kv_value(k, i);
                let mut cmd = format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n",
                    key.len(),
                    val.len()
                )
                .into_bytes();
                cmd.extend_from_slice(&val);
                cmd.extend_from_slice(b"\r\n");
                let v = at(&mut blob, &val);
                (cmd, json!({"op": "put", "keys": [key], "vals": [v]}))
            } else {
                let cmd = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
                (cmd.into_bytes(), json!({"op": "get", "keys": [key]}))
            };
            let payload = at(&mut blob, &cmd);
            requests.push(json!({"type": 1, "payload": payload, "expect": {"kv": expect}}));
        }
        let plan = json!({
            "mode": "rust-kv",
            "shape": "kv",
            "check_every": 1,
            "timeout_ms": 1000,
            "fixed": {"rate_rps": RATE, "requests": REQUESTS},
            "requests": requests,
            "kv": {"initial": initial},
        });
        std::fs::write(dir.join("plan.bin"), blob).unwrap();
        place(dir, &plan);
    }

    /// A RESP store serving until the plan is done; when `stale`, it acknowledges every SET
    /// without doing it, so later GETs return the value before.
    fn serve_kv(dp: cf_dp, dir: &Path, stale: bool) -> u64 {
        let mut store: std::collections::HashMap<Vec<u8>, Vec<u8>> = (0..KV_KEYS)
            .map(|k| (format!("key{k}").into_bytes(), kv_value(k, 0)))
            .collect();
        let mut parser = resp::Parser::new();
        serve_with(dp, dir, |r| {
            let args = parser.parse(request_bytes(r)).expect("a RESP command");
            let reply = if args.is("SET") {
                if !stale {
                    store.insert(args.arg(1).to_vec(), args.arg(2).to_vec());
                }
                b"+OK\r\n".to_vec()
            } else {
                let v = &store[args.arg(1)];
                let mut out = format!("${}\r\n", v.len()).into_bytes();
                out.extend_from_slice(v);
                out.extend_from_slice(b"\r\n");
                out
            };
            reply_copy(dp, r, &reply);
        })
    }

    #[test]
    fn a_store_with_writes_is_checked_in_order_and_a_stale_one_caught() {
        if !two_cpus("a_store_with_writes_is_checked_in_order_and_a_stale_one_caught") {
            return;
        }
        let (report, served) = run_plan("kv", write_kv_plan, |dp, dir| serve_kv(dp, dir, false));
        let sent = sent_of(&report);
        // A reply later than the timeout (this machine's other processes can hold the server
        // thread off its CPU) is lost, not wrong: a write among them leaves its key either way
        // until a read settles it, so no later read is called wrong for it.
        assert_eq!(count(&report, "mismatched"), 0, "{report:#}");
        assert_eq!(
            count(&report, "verified") + count(&report, "lost"),
            sent,
            "{report:#}"
        );
        assert!(count(&report, "verified") > sent / 2, "{report:#}");
        // Requests the device could not deliver (no receive buffer free) are lost unserved.
        assert!(
            served >= count(&report, "verified") && served <= sent,
            "{served} served"
        );
        // Dropping the SETs makes most GETs after them stale: caught, though every reply
        // is a value the key held at some point.
        let (report, _) = run_plan("kv-stale", write_kv_plan, |dp, dir| serve_kv(dp, dir, true));
        let sent = sent_of(&report);
        let mismatched = count(&report, "mismatched");
        assert!(
            mismatched > sent / 4,
            "{mismatched} mismatched of {sent}: {report:#}"
        );
    }
}
