//! Cornflakes frames over Demikernel's TCP (catpowder LibOS on a raw socket) on a veth pair
//! between two network namespaces the test creates: Demikernel owns side A's address (the
//! kernel there has none, so it sends no resets), and a kernel-TCP client
//! (`datapath_tcp::TcpDatapath`) on side B sends objects that the Demikernel server echoes.
//! Also shows that Demikernel 1.5.13 refuses the paper's multi-segment array. Needs root and
//! `ip`; prints SKIPPED otherwise (`CORNFLAKES_REQUIRE_NETNS=1` turns that into a failure).

use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Connect, DatapathMemory, Receive, Transmit};
use cornflakes::handwritten::GetM;
use cornflakes::{Arena, CFBytes, CFPtr, Msg, PinnedMemory};
use cornflakes_demikernel::config::CatpowderConfig;
use cornflakes_demikernel::{io_error, push_bytes, push_zero_copy};
use datapath_tcp::frame::Deframer;
use datapath_tcp::{TcpConfig, TcpDatapath};
use demikernel::runtime::types::demi_opcode_t;
use demikernel::{LibOS, LibOSName};
use netns_harness::{in_netns, Suite, VethPair};

const SUITE: Suite = Suite::new("cfdemi", "cdm", "CORNFLAKES_REQUIRE_NETNS");
const PORT: u16 = 7300;
const MESSAGES: usize = 5;

fn config(v: &VethPair) -> String {
    CatpowderConfig {
        ip: v.ip_a,
        mac: v.mac_a,
        ifname: v.if_a.clone(),
        arp: vec![(v.ip_b, v.mac_b)],
        mtu: 1500,
    }
    .yaml()
}

/// The kernel-TCP client on side B: sends `MESSAGES` objects, returns how many echoes matched.
fn client(server: SocketAddrV4) -> Result<usize, String> {
    let mut dp = TcpDatapath::new(TcpConfig::new(None)).map_err(|e| e.to_string())?;
    let conn = dp
        .connect(server)
        .map_err(|e| format!("connect {server}: {e}"))?;
    let arena = Arena::with_memory(dp.memory());
    for i in 0..MESSAGES {
        let mut m = GetM::new_in(&arena);
        m.set_id(i as u32);
        m.init_vals(2);
        let v = dp
            .memory()
            .alloc_copy(&vec![i as u8; 700 * (i + 1)])
            .map_err(|e| e.to_string())?;
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(v, &arena)));
        m.get_mut_vals().append(CFBytes::new(b"short", &arena));
        dp.send_object(conn, Msg::new(i as u32, 4), &m)
            .map_err(|e| e.to_string())?;
    }
    dp.flush().map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(20);
    while got.len() < MESSAGES {
        if Instant::now() > end {
            return Err(format!("{} of {MESSAGES} echoes in 20 s", got.len()));
        }
        dp.recv_burst(&mut got).map_err(|e| e.to_string())?;
    }
    let mut ok = 0;
    for r in &got {
        let a = Arena::new();
        let m = GetM::deserialize(&r.data, &a).map_err(|e| e.to_string())?;
        let i = m.get_id() as usize;
        if r.msg == Msg::new(i as u32, 4)
            && m.get_vals()[0].as_bytes() == &vec![i as u8; 700 * (i + 1)][..]
            && m.get_vals()[1].as_bytes() == b"short"
        {
            ok += 1;
        }
    }
    Ok(ok)
}

/// The test that runs as the Demikernel server process (`ip netns exec` in namespace A, so
/// that `/sys/class/net` — where catpowder looks up its interface — is namespace A's).
const CHILD: &str = "demikernel_echo_server_process";

#[test]
fn cornflakes_frames_over_demikernel_tcp_on_a_veth_pair() {
    if let Some(why) = SUITE.skip_reason() {
        SUITE.skip("cornflakes_frames_over_demikernel_tcp_on_a_veth_pair", &why);
        return;
    }
    let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
    let path = std::env::temp_dir().join(format!("cfdemi-{}.yaml", std::process::id()));
    std::fs::write(&path, config(&v)).unwrap();
    let server = SocketAddrV4::new(v.ip_a, PORT);
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", &v.ns_a])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            CHILD,
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("CONFIG_PATH", &path)
        .env("CFDEMI_SERVER", server.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the Demikernel server process");
    // The client retries its connect until the server listens (or 20 s pass).
    let ns_b = v.ns_b.clone();
    let result = in_netns(&ns_b, move || {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            match client(server) {
                Err(e) if e.starts_with("connect") && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                r => return r,
            }
        }
    })
    .expect("run the client in namespace B");
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&path);
    let log = format!(
        "server stdout:\n{}\nserver stderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the Demikernel server failed (client: {result:?})\n{log}"
    );
    assert_eq!(result, Ok(MESSAGES), "{log}");
    println!("{log}");
}

#[test]
#[ignore = "the Demikernel server process of cornflakes_frames_over_demikernel_tcp_on_a_veth_pair"]
fn demikernel_echo_server_process() {
    let server: SocketAddrV4 = std::env::var("CFDEMI_SERVER")
        .expect("run by cornflakes_frames_over_demikernel_tcp_on_a_veth_pair")
        .parse()
        .unwrap();
    let mut libos = LibOS::new(LibOSName::Catpowder, None)
        .map_err(io_error)
        .expect("start the catpowder LibOS");
    let qd = libos
        .socket(libc::AF_INET, libc::SOCK_STREAM, 0)
        .map_err(io_error)
        .unwrap();
    libos
        .bind(qd, SocketAddr::V4(server))
        .map_err(io_error)
        .unwrap();
    libos.listen(qd, 16).map_err(io_error).unwrap();
    let accept = libos.accept(qd).map_err(io_error).unwrap();
    let r = libos
        .wait(accept, Some(Duration::from_secs(20)))
        .map_err(io_error)
        .unwrap();
    assert_eq!(
        r.qr_opcode,
        demi_opcode_t::DEMI_OPC_ACCEPT,
        "accept failed: {}",
        r.qr_ret
    );
    // SAFETY: an ACCEPT result carries `ares`.
    let conn = unsafe { r.qr_value.ares.qd } as u32;
    let conn = demikernel::QDesc::from(conn);

    // The paper's array (header segment + value segments referencing pinned memory) is refused.
    let mem = PinnedMemory::with_defaults().unwrap();
    let hdr = mem
        .alloc_copy(&[0u8; datapath_tcp::frame::HEADER_LEN])
        .unwrap();
    let val = mem.alloc_copy(&[1u8; 1024]).unwrap();
    let e = push_zero_copy(&mut libos, conn, &hdr, &[val]).expect_err("multi-segment push");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("segment count"), "{e}");

    // Echo every frame back, copied into one sgaalloc'd segment.
    let mut d = Deframer::new(64 << 10, 16 << 10);
    // Echo until the client, having checked every echo, closes: waiting on the next pop drives
    // Demikernel's sending and retransmission meanwhile.
    let mut echoed = 0;
    let mut frames = Vec::new();
    let mut pushes = Vec::new();
    loop {
        let pop = libos.pop(conn, None).map_err(io_error).unwrap();
        let r = libos
            .wait(pop, Some(Duration::from_secs(20)))
            .map_err(io_error)
            .unwrap();
        assert_eq!(
            r.qr_opcode,
            demi_opcode_t::DEMI_OPC_POP,
            "pop failed: {}",
            r.qr_ret
        );
        // SAFETY: a POP result carries `sga`.
        let sga = unsafe { r.qr_value.sga };
        let seg = sga.sga_segs[0];
        // SAFETY: the popped array's segment points at `sgaseg_len` bytes Demikernel owns until
        // `sgafree`, below.
        let mut bytes = unsafe {
            std::slice::from_raw_parts(seg.sgaseg_buf as *const u8, seg.sgaseg_len as usize)
        };
        if bytes.is_empty() {
            break; // end of stream
        }
        while !bytes.is_empty() {
            let space = d.space(&mem).unwrap();
            let k = space.len().min(bytes.len());
            space[..k].copy_from_slice(&bytes[..k]);
            d.filled(k, &mem, &mut frames).unwrap();
            bytes = &bytes[k..];
        }
        libos.sgafree(sga).map_err(io_error).unwrap();
        for (msg, data) in frames.drain(..) {
            pushes.extend(push_bytes(&mut libos, conn, msg, &data).unwrap());
            echoed += 1;
        }
    }
    assert_eq!(echoed, MESSAGES, "the client closed after {echoed} echoes");
    // How many pushes Demikernel reports complete (the client has every byte by now).
    let done = pushes
        .into_iter()
        .filter(|&qt| {
            libos
                .wait(qt, Some(Duration::from_millis(100)))
                .is_ok_and(|r| r.qr_opcode == demi_opcode_t::DEMI_OPC_PUSH)
        })
        .count();
    println!("echoed {echoed} frames; pushes reported complete: {done}");
}
