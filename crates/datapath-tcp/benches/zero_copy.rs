//! What `MSG_ZEROCOPY` costs against a copying `sendmsg`, per message size: one message of N
//! bytes from a pinned buffer sent over a TCP connection, received by the other end (polled in
//! the same loop), and — for the zero-copy sends — its completion read from the error queue.
//!
//! On loopback the kernel always copies a zero-copy send at delivery (the receiver must not
//! see the sender's pages), so here `MSG_ZEROCOPY` can only add its cost (page pinning, the
//! notification, the error-queue read) to a copy that happens anyway: the difference between
//! the two lines is that overhead. The saving it buys exists only with a NIC that DMAs from the
//! pinned pages; see `docs/tcp.md`, "Zero-copy threshold".
//!
//! `cargo bench -p datapath-tcp --bench zero_copy` (on a quiet machine).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{ConnId, Msg};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use datapath_tcp::{TcpConfig, TcpDatapath, ZeroCopy};

fn pair(zero_copy: bool) -> (TcpDatapath, TcpDatapath, ConnId) {
    let mut s = TcpConfig::new(Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
    s.stream.rx_buffer = 256 << 10;
    let mut srv = TcpDatapath::new(s).unwrap();
    let mut c = TcpConfig::new(None);
    c.zero_copy = if zero_copy {
        ZeroCopy {
            threshold: 0,
            ..ZeroCopy::default()
        }
    } else {
        ZeroCopy::OFF
    };
    let mut cli = TcpDatapath::new(c).unwrap();
    let conn = cli.connect(srv.local_addr()).unwrap();
    while srv.connections() == 0 {
        srv.recv_burst(&mut Vec::new()).unwrap();
    }
    (srv, cli, conn)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_send");
    g.measurement_time(Duration::from_secs(3));
    for size in [4usize << 10, 16 << 10, 64 << 10, 200 << 10] {
        g.throughput(Throughput::Bytes(size as u64));
        for zc in [false, true] {
            let (mut srv, mut cli, conn) = pair(zc);
            let buf = cli.memory().alloc_copy(&vec![7u8; size]).unwrap();
            let mut rx = Vec::new();
            let name = if zc { "msg_zerocopy" } else { "copy" };
            g.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter_custom(|iters| {
                    let t = Instant::now();
                    for i in 0..iters {
                        cli.send_sga(conn, Msg::new(i as u32, 0), std::slice::from_ref(&buf))
                            .unwrap();
                        cli.flush().unwrap();
                        while rx.is_empty() {
                            srv.recv_burst(&mut rx).unwrap();
                            cli.recv_burst(&mut Vec::new()).unwrap();
                        }
                        rx.clear();
                        while cli.in_flight() > 0 {
                            cli.poll_completions();
                        }
                    }
                    t.elapsed()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
