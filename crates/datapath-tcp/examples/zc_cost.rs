//! Per-send CPU time (user + system, from `getrusage`) of a copying `sendmsg`, a
//! `MSG_ZEROCOPY` send and an io_uring `SENDMSG_ZC` send of one N-byte pinned buffer over a
//! loopback TCP connection — the input for `ZeroCopy::threshold`.
//!
//! ```text
//! cargo run --release -p datapath-tcp --example zc_cost -- [--sends N] [--sizes 4096,16384,...]
//! ```
//!
//! Both ends run in this one thread, so each figure is the whole cost of one message: send,
//! loopback delivery, receive, and for the zero-copy modes the completion. On loopback the
//! kernel copies every zero-copy send at delivery (the receiver must not see the sender's
//! pages; the `copied` column shows it), so the zero-copy rows can only show what zero-copy
//! *adds* (page pinning, the notification and reading it) on top of a copy that still
//! happens — the overhead the threshold must amortise. The copy a NIC's DMA saves does not
//! appear here; measure that on the target NIC. Run on a quiet machine: CPU time of a busy
//! one includes contention (cache misses, scheduler), though far less than wall time does.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{ConnId, Msg};
use datapath_tcp::{TcpConfig, TcpDatapath, ZeroCopyMode};

#[derive(Clone, Copy)]
enum Mode {
    Copy,
    MsgZerocopy,
    SendZc,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Copy => "copy",
            Mode::MsgZerocopy => "msg_zerocopy",
            Mode::SendZc => "io_uring_send_zc",
        }
    }
}

fn pair(mode: Mode, size: usize) -> (TcpDatapath, TcpDatapath, ConnId) {
    let mut s = TcpConfig::new(Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
    s.stream.rx_buffer = size + 64;
    let mut srv = TcpDatapath::new(s).expect("server datapath");
    let mut c = TcpConfig::new(None);
    match mode {
        Mode::Copy => c.zero_copy.mode = ZeroCopyMode::Off,
        Mode::MsgZerocopy => c.zero_copy.threshold = 0,
        Mode::SendZc => {
            c.zero_copy.threshold = 0;
            c.zero_copy.mode = ZeroCopyMode::IoUring;
        }
    }
    let mut cli = TcpDatapath::new(c).expect("client datapath");
    let conn = cli.connect(srv.local_addr()).expect("connect");
    while srv.connections() == 0 {
        srv.recv_burst(&mut Vec::new()).expect("accept");
    }
    (srv, cli, conn)
}

/// User + system CPU time of this process so far, in microseconds.
fn cpu_us() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage; getrusage fills it.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(r, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: getrusage succeeded, so it initialised `ru` (it was zeroed besides).
    let ru = unsafe { ru.assume_init() };
    let t = |v: libc::timeval| v.tv_sec as f64 * 1e6 + v.tv_usec as f64;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Sends `n` messages of `size` bytes one at a time, each received (and, for zero-copy,
/// completed) before the next. Returns (CPU µs per send, wall µs per send, copied sends).
fn run(mode: Mode, size: usize, n: usize) -> (f64, f64, u64) {
    let (mut srv, mut cli, conn) = pair(mode, size);
    let buf = cli.memory().alloc_copy(&vec![7u8; size]).expect("alloc");
    let mut rx = Vec::new();
    let mut once = |i: usize| {
        cli.send_sga(conn, Msg::new(i as u32, 0), std::slice::from_ref(&buf))
            .expect("send");
        cli.flush().expect("flush");
        while rx.is_empty() {
            srv.recv_burst(&mut rx).expect("server recv");
            cli.recv_burst(&mut Vec::new()).expect("client recv");
        }
        assert_eq!(rx[0].data.len(), size, "short message");
        rx.clear();
        while cli.in_flight() > 0 {
            cli.poll_completions();
        }
    };
    for i in 0..n.div_ceil(10) {
        once(i); // warm-up
    }
    let (c0, t0) = (cpu_us(), Instant::now());
    for i in 0..n {
        once(i);
    }
    let cpu = (cpu_us() - c0) / n as f64;
    let wall = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    (cpu, wall, cli.stats().device.zero_copy_copied)
}

fn main() {
    let mut sends = 20_000usize;
    let mut sizes = vec![
        1usize << 10,
        4 << 10,
        8 << 10,
        16 << 10,
        32 << 10,
        64 << 10,
        200 << 10,
    ];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--sends" => sends = v.parse().expect("--sends: a number"),
            "--sizes" => {
                sizes = v
                    .split(',')
                    .map(|s| s.parse().expect("--sizes: comma-separated byte counts"))
                    .collect()
            }
            _ => panic!("unknown argument {a} (--sends N, --sizes A,B,...)"),
        }
    }
    let max = TcpConfig::new(None).stream.max_message_len;
    assert!(
        sizes.iter().all(|&s| s <= max),
        "sizes must be at most {max} bytes"
    );
    println!("size_bytes\tmode\tcpu_us_per_send\twall_us_per_send\tcopied_by_kernel");
    for &size in &sizes {
        for mode in [Mode::Copy, Mode::MsgZerocopy, Mode::SendZc] {
            let (cpu, wall, copied) = run(mode, size, sends);
            println!("{size}\t{}\t{cpu:.3}\t{wall:.3}\t{copied}", mode.name());
        }
    }
}
