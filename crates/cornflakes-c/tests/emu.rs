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
    /// `check_every` is 1). plan.json appears whole (renamed into place): the device starts
    /// when it sees it.
    fn write_plan(dir: &Path, check_every: u64) {
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
        std::fs::write(dir.join(".plan.tmp"), plan.to_string()).unwrap();
        std::fs::rename(dir.join(".plan.tmp"), dir.join("plan.json")).unwrap();
    }

    /// Serves until the plan is done: echoes each request by reference, or (when `lie`) every
    /// 50th by copy with one byte changed. Returns how many it served.
    fn serve(dp: cf_dp, dir: &Path, lie: bool) -> u64 {
        let mut rx = vec![cf_rx::default(); 32];
        let mut served = 0u64;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dir.join("done").exists() {
            assert!(Instant::now() < deadline, "the plan did not finish in 60 s");
            let mut n = 0usize;
            ok(cf_dp_recv(dp, rx.as_mut_ptr(), rx.len(), &mut n));
            for r in &rx[..n] {
                if lie && r.msg_id % 50 == 0 {
                    let (mut p, mut len) = (std::ptr::null(), 0usize);
                    ok(cf_buf_data(r.data, &mut p, &mut len));
                    // SAFETY: cf_buf_data gave a pointer to `len` bytes that stay valid while
                    // the buffer is held (released below).
                    let mut copy = unsafe { std::slice::from_raw_parts(p, len) }.to_vec();
                    copy[len / 2] ^= 0x5a;
                    ok(cf_dp_send_copy(
                        dp,
                        r.conn,
                        r.incarnation,
                        r.msg_id,
                        r.msg_type,
                        copy.as_ptr(),
                        copy.len(),
                    ));
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
                ok(cf_buf_release(r.data));
                served += 1;
            }
            if n > 0 {
                ok(cf_dp_flush(dp));
            }
        }
        served
    }

    /// One plan on a fresh device: the report, and what this thread served.
    fn run(lie: bool) -> (Value, u64) {
        let dir = std::env::temp_dir().join(format!(
            "cf-emu-rust-{}-{}",
            std::process::id(),
            if lie { "liar" } else { "honest" }
        ));
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
        write_plan(&dir, if lie { 1 } else { 8 });
        let served = serve(dp, &dir, lie);
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
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            test_skip::skip(
                "a_server_on_the_emulated_connectx_is_checked_and_a_liar_caught",
                &format!(
                    "the emulated ConnectX needs two CPUs (server and device); this has {cpus}"
                ),
            );
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
}
