//! `cf_dp_xdp_new` called from Rust (feature `xdp`, root): an AF_XDP datapath in copy mode on
//! one end of a veth pair between two namespaces made here (crates/netns-harness), a socket
//! datapath made in the other as its peer, all on this thread (handles belong to it). A copy
//! each way and a message with a pinned value sent by reference, whose reference the send
//! holds until the device is done. So `cargo test --all-features` covers the AF_XDP handle too,
//! and a nightly `-Zsanitizer=address` run with `--features xdp` checks the library's own code
//! on it; tests/c/test_dp.c is the fuller test from C.

use netns_harness::Suite;

const SUITE: Suite = Suite {
    root_needed_for: "network namespaces, veth and AF_XDP",
    ..Suite::new("cfcx", "cfx", "CORNFLAKES_REQUIRE_XDP")
};

#[cfg(not(feature = "xdp"))]
#[test]
fn af_xdp_handle_between_namespaces() {
    SUITE.skip(
        "af_xdp_handle_between_namespaces",
        "built without `--features xdp` (clang, libbpf-dev: crates/datapath-xdp/APT_PACKAGES)",
    );
}

#[cfg(feature = "xdp")]
#[test]
fn af_xdp_handle_between_namespaces() {
    use std::ffi::{CStr, CString};
    use std::time::{Duration, Instant};

    use cornflakes_c::*;
    use netns_harness::{NetnsGuard, VethPair};

    fn ok(s: cf_status) {
        // SAFETY: cf_last_error returns a valid NUL-terminated string owned by the library.
        let e = unsafe { CStr::from_ptr(cf_last_error()) };
        assert_eq!(s, cf_status::CF_OK, "{e:?}");
    }
    /// Receives one message on `dp` within 5 s, polling `other` meanwhile.
    fn recv_one(dp: cf_dp, other: cf_dp) -> Option<cf_rx> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut rx = [cf_rx::default(); 1];
        while Instant::now() < deadline {
            let mut n = 0;
            ok(cf_dp_recv(dp, rx.as_mut_ptr(), 1, &mut n));
            if n == 1 {
                return Some(rx[0]);
            }
            let mut m = 0;
            ok(cf_dp_recv(other, rx.as_mut_ptr(), 1, &mut m));
            assert_eq!(m, 0, "nothing is sent the other way now");
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }
    fn bytes(b: cf_buf) -> Vec<u8> {
        let (mut p, mut n) = (std::ptr::null(), 0usize);
        ok(cf_buf_data(b, &mut p, &mut n));
        // SAFETY: the library returned `n` readable bytes at `p`, valid while `b` is live.
        unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
    }

    const TEST: &str = "af_xdp_handle_between_namespaces";
    if let Some(why) = SUITE.xdp_skip_reason() {
        SUITE.skip(TEST, &why);
        return;
    }
    let v = VethPair::create(&SUITE, 1500).expect("namespaces and veth");
    let c = |s: String| CString::new(s).unwrap();
    let (ip_a, ip_b) = (c(v.ip_a.to_string()), c(v.ip_b.to_string()));
    let mac = netns_harness::host::format_mac(v.mac_b);
    let peer = c(format!("{}={mac}", v.ip_b));
    let if_a = c(v.if_a.clone());
    let mut client = cf_dp { id: 0 };
    {
        let _in_b = NetnsGuard::enter(&v.ns_b).expect("enter namespace B");
        ok(cf_dp_socket_new(ip_b.as_ptr(), 0, &mut client));
    }
    let _in_a = NetnsGuard::enter(&v.ns_a).expect("enter namespace A");
    let mut server = cf_dp { id: 0 };
    ok(cf_dp_xdp_new(
        if_a.as_ptr(),
        ip_a.as_ptr(),
        7400,
        peer.as_ptr(),
        0,
        &mut server,
    ));
    let mut kind = std::ptr::null();
    ok(cf_dp_kind(server, &mut kind));
    // SAFETY: a static string from the library.
    assert_eq!(unsafe { CStr::from_ptr(kind) }.to_str().unwrap(), "xdp");

    // client → server, a copy
    let mut conn = 0;
    ok(cf_dp_connect(client, ip_a.as_ptr(), 7400, &mut conn));
    ok(cf_dp_send_copy(
        client,
        conn,
        0xc0de,
        5,
        9,
        b"hello".as_ptr(),
        5,
    ));
    ok(cf_dp_flush(client));
    let rx = recv_one(server, client).expect("the request over AF_XDP");
    assert_eq!((rx.incarnation, rx.msg_id, rx.msg_type), (0xc0de, 5, 9));
    assert_eq!(rx.peer_ip, u32::from(v.ip_b));
    assert_eq!(bytes(rx.data), b"hello");
    ok(cf_buf_release(rx.data));

    // server → client: a 3000-byte pinned value by reference, held by the send until done
    let mut mem = cf_mem { id: 0 };
    ok(cf_dp_memory(server, &mut mem));
    let value: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let mut b = cf_buf { id: 0 };
    ok(cf_buf_alloc(mem, value.as_ptr(), value.len(), &mut b));
    ok(cf_dp_send_bufs(
        server,
        rx.conn,
        rx.incarnation,
        6,
        10,
        &b,
        1,
    ));
    let mut rc = 0;
    ok(cf_buf_refcount(b, &mut rc));
    assert!(rc >= 2, "the send holds the buffer ({rc})");
    ok(cf_dp_flush(server));
    let back = recv_one(client, server).expect("the reply over the kernel");
    assert_eq!((back.incarnation, back.msg_id), (0xc0de, 6));
    assert_eq!(bytes(back.data), value);
    ok(cf_buf_release(back.data));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut in_flight = 1;
    while in_flight > 0 && Instant::now() < deadline {
        ok(cf_dp_flush(server));
        ok(cf_dp_in_flight(server, &mut in_flight));
    }
    assert_eq!(in_flight, 0);
    ok(cf_buf_refcount(b, &mut rc));
    assert_eq!(rc, 1, "the send's reference was given back");
    ok(cf_buf_release(b));
    ok(cf_mem_release(mem));
    ok(cf_dp_release(server));
    ok(cf_dp_release(client));
}
