//! What the multi-core tests share: one run at a time, requests spread over cores, a
//! zero-copy echo loop and a byte-for-byte reply check.

use std::sync::Mutex;
use std::time::Duration;

use cornflakes::datapath::{Completions, Receive, Transmit};
use datapath_mlx5::emu::threaded::ThreadedQueues;
use datapath_mlx5::Mlx5Datapath;
use emu_bench::{EmuRunConfig, Request, ServerPort};

/// One run at a time: each spins several threads, and the machine may have two CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Request `i` goes to core `i % cores`; its payload names it.
pub fn requests(n: usize, cores: usize) -> Vec<Request> {
    (0..n)
        .map(|i| Request {
            msg_type: 5,
            payload: (0..(48 + i * 61)).map(|b| (b * 7 + i) as u8).collect(),
            core: i % cores,
            with_previous: false,
        })
        .collect()
}

/// Echoes every message by reference (the received buffer goes back out) until the run
/// stops; yields when idle (the tests' threads share CPUs). Returns the messages echoed.
pub fn echo_until_stopped(dp: &mut Mlx5Datapath<ThreadedQueues>, port: &ServerPort) -> u64 {
    let mut rx = Vec::new();
    let mut echoed = 0u64;
    while !port.stopped() {
        rx.clear();
        dp.recv_burst(&mut rx).expect("recv");
        for m in &rx {
            dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data))
                .expect("send");
            echoed += 1;
        }
        dp.flush().expect("flush");
        dp.poll_completions();
        if rx.is_empty() {
            std::thread::yield_now();
        }
    }
    echoed
}

/// A reply check: reply `i` must be request `i`'s payload, byte for byte.
pub fn check_echo(reqs: &[Request]) -> impl Fn(usize, &[u8]) -> Result<(), String> + Send {
    let expected: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload.clone()).collect();
    move |i: usize, reply: &[u8]| {
        if reply == expected[i] {
            Ok(())
        } else {
            Err(format!("request {i}: reply differs"))
        }
    }
}

/// A run on `cores` unpinned server cores at a low load with every reply read whole:
/// **functional only** (more threads than CPUs; its numbers mean nothing).
pub fn cfg(cores: usize) -> EmuRunConfig {
    EmuRunConfig {
        rate_rps: 8_000.0,
        duration: Duration::from_millis(200),
        warmup: Duration::from_millis(20),
        // Generous: the threads share the CPUs.
        timeout: Duration::from_millis(800),
        sample_every: 1,
        check_every: 1,
        cores,
        pin: false,
        ..EmuRunConfig::default()
    }
}
