//! The launcher with a test handler: a request of type 1 is answered `pong`, any other type is
//! malformed.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::{Datapath, Msg, RxMsg};
use datapath_socket::SocketConfig;

use super::*;

/// Answers type-1 requests with `pong`.
struct Pong;

impl Handler for Pong {
    type Counters = ();

    fn label(&self) -> String {
        "pong".to_owned()
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        if m.msg.ty != 1 {
            return Err(Unanswered::Malformed(format!("type {}", m.msg.ty)));
        }
        Ok(dp.send_copy(m.conn, m.msg, b"pong")?)
    }

    fn counters(&self) {}
}

/// A free TCP port on 127.0.0.1 for `cores` consecutive ports (the launcher binds base + i).
fn free_tcp_ports(cores: u16) -> u16 {
    for base in (20000 + (std::process::id() % 20000) as u16..60000).step_by(cores as usize) {
        let all_free = (0..cores).all(|i| {
            std::net::TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, base + i)).is_ok()
        });
        if all_free {
            return base;
        }
    }
    panic!("no free TCP ports");
}

#[test]
fn the_launcher_serves_a_handler_over_kernel_tcp_on_each_core() {
    use datapath_tcp::frame::{write_header, HEADER_LEN};
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let mut a = cli_args::Args::new(vec!["--datapath".into(), "tcp".into()]);
    let transport = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS).unwrap();
    assert_eq!(
        (transport.name(), transport.clone()),
        ("tcp", DatapathSpec::new(DatapathKind::Tcp))
    );
    let base = free_tcp_ports(2);
    let mut l = Launch::new(
        transport,
        SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, base)),
        "counting",
        crate::CargoRun {
            package: "app-server",
            bin: None,
            args: "",
        },
    );
    l.cores = 2;
    l.report = None;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let server =
        std::thread::spawn(move || launch(&l, |_: &cornflakes::PinnedMemory, _| Ok(Pong), &s2));
    // Each core answers on its own port; a bad request type is counted, not answered.
    for i in 0..2u16 {
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, base + i);
        let end = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match std::net::TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("{addr}: {e}"),
            }
        };
        let frame = |ty: u16| {
            let mut f = vec![0u8; HEADER_LEN];
            write_header(&mut f, Msg::new(7, ty), 4);
            f.extend_from_slice(b"ping");
            f
        };
        s.write_all(&frame(2)).unwrap();
        s.write_all(&frame(1)).unwrap();
        let mut reply = vec![0u8; HEADER_LEN + 4];
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.read_exact(&mut reply).unwrap();
        let mut want = vec![0u8; HEADER_LEN];
        write_header(&mut want, Msg::new(7, 1), 4);
        want.extend_from_slice(b"pong");
        assert_eq!(reply, want, "core {i}");
    }
    stop.store(true, Ordering::Relaxed);
    let st = server.join().unwrap().unwrap();
    assert_eq!((st.received, st.replied, st.malformed), (4, 2, 2), "{st}");
}

/// Each core of [`spawn_on_cores`]: which port its datapath got, and that it can send (the
/// body's work: one request to a peer, the reply read back).
struct Probe {
    peer: SocketAddrV4,
}

impl OnCore for Probe {
    type Out = (usize, SocketAddrV4, Vec<u8>);

    fn run<D: Datapath>(
        &self,
        mut dp: D,
        core: &percore::Core,
        ready: percore::Ready<percore::QueueInfo>,
        info: percore::QueueInfo,
    ) -> Result<Self::Out, String> {
        let local = dp.local_addr();
        ready.ready(info);
        let conn = dp.connect(self.peer).map_err(|e| e.to_string())?;
        dp.send_copy(conn, Msg::new(core.index() as u32, 1), b"ping")
            .map_err(|e| e.to_string())?;
        dp.flush().map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut rx: Vec<RxMsg> = Vec::new();
        while Instant::now() < deadline {
            dp.recv_burst(&mut rx).map_err(|e| e.to_string())?;
            if let Some(m) = rx.first() {
                return Ok((core.index(), local, m.data.to_vec()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Err(format!("core {}: no reply", core.index()))
    }
}

#[test]
fn cores_open_their_own_datapaths_at_consecutive_ports() {
    let server = ServerHandle::spawn_one(
        "pong",
        SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)),
        None,
        false,
        |_, _| Ok(Pong),
    )
    .unwrap();
    let base = free_tcp_ports(2);
    let sc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, base));
    let run = CargoRun {
        package: "app-server",
        bin: None,
        args: "",
    };
    let mut l = Launch::new(DatapathSpec::new(DatapathKind::Socket), sc, "probe", run);
    l.cores = 2;
    l.name = "probe".to_owned();
    let cores = spawn_on_cores(
        &l,
        Probe {
            peer: server.addr(),
        },
    )
    .unwrap();
    let ready: Vec<u16> = cores.ready().iter().map(|(a, _)| a.port()).collect();
    assert_eq!(ready, [base, base + 1]);
    assert!(
        cores
            .ready()
            .iter()
            .all(|(_, what)| what == "socket, IP MTU 1500"),
        "{:?}",
        cores.ready()
    );
    let out = cores.join().unwrap();
    for (i, (core, local, reply)) in out.into_iter().enumerate() {
        assert_eq!((core, local.port()), (i, base + i as u16));
        assert_eq!(reply, b"pong");
    }
    server.stop().unwrap();
    // Kernel TCP is not opened here, and zero cores is an error.
    let mut l0 = l.clone();
    l0.cores = 0;
    assert!(spawn_on_cores(
        &l0,
        Probe {
            peer: server_addr()
        }
    )
    .is_err());
    l.spec = DatapathSpec::new(DatapathKind::Tcp);
    assert!(spawn_on_cores(
        &l,
        Probe {
            peer: server_addr()
        }
    )
    .is_err());
    // Nor is a bench's own emulated device: the opener refuses it on the core.
    l.spec = DatapathSpec::new(DatapathKind::Emu);
    let e = spawn_on_cores(
        &l,
        Probe {
            peer: server_addr(),
        },
    )
    .err()
    .unwrap();
    assert!(e.contains("--datapath emu is the emulated ConnectX"), "{e}");
}

fn server_addr() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9)
}
