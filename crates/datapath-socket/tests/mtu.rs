//! A receiver whose MTU is smaller than its sender's: every too-large datagram is dropped and
//! counted (`truncated`), the first one is also told on stderr with the setting that fixes it,
//! and a receiver at the sender's MTU gets the message. The stderr check runs this test binary
//! again as a child (`MTU_CHILD`), so the parent can read what the child printed.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;

use cornflakes::datapath::{Connect, Receive, Transmit};
use cornflakes::{Msg, RxMsg};
use datapath_socket::{SocketConfig, SocketDatapath, JUMBO_MTU};

fn dp(mtu: usize) -> SocketDatapath {
    let mut c = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    c.mtu = mtu;
    SocketDatapath::new(c).expect("bind 127.0.0.1")
}

/// Sends `n` 4 000-byte messages from a `JUMBO_MTU` sender (one datagram each) to `rx`, then
/// polls `rx` until they arrived or were counted as truncated.
fn send_big(rx: &mut SocketDatapath, n: u32) -> Vec<RxMsg> {
    let mut tx = dp(JUMBO_MTU);
    let conn = tx.connect(rx.local_addr()).unwrap();
    for id in 0..n {
        tx.send_copy(conn, Msg::new(id + 1, 1), &[7u8; 4000])
            .unwrap();
    }
    tx.flush().unwrap();
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        rx.recv_burst(&mut out).unwrap();
        if out.len() + rx.counters().truncated as usize >= n as usize {
            break;
        }
        std::thread::yield_now();
    }
    out
}

#[test]
fn a_receiver_at_the_senders_mtu_gets_the_message() {
    let mut rx = dp(JUMBO_MTU);
    let got = send_big(&mut rx, 3);
    assert_eq!(got.len(), 3, "counters {:?}", rx.counters());
    assert_eq!(rx.counters().truncated, 0);
}

/// The child's half: three datagrams too large for a 1500-MTU receiver.
#[test]
fn too_large_datagrams_child() {
    if std::env::var_os("MTU_CHILD").is_none() {
        return;
    }
    let mut rx = dp(1500);
    let got = send_big(&mut rx, 3);
    assert!(got.is_empty());
    assert_eq!(rx.counters().truncated, 3);
    eprintln!("child done: {}", rx.local_addr());
}

#[test]
fn too_large_datagrams_are_counted_and_told_once() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "too_large_datagrams_child", "--nocapture"])
        .env("MTU_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {err}");
    assert!(err.contains("child done"), "the child ran: {err}");
    let told: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("larger than its receive buffers"))
        .collect();
    assert_eq!(told.len(), 1, "told exactly once: {err}");
    assert!(told[0].contains("IP MTU 1500"), "{}", told[0]);
    assert!(told[0].contains("--mtu"), "names the flag: {}", told[0]);
    assert!(
        told[0].contains("cf_socket_opts.mtu"),
        "names the C setting: {}",
        told[0]
    );
}
