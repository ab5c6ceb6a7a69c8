//! The datapath constructors of the C API called from Rust: which datapaths this build has
//! (`cf_dp_kinds`), the `CF_ERR_UNSUPPORTED` error (and how to build it) of one whose feature
//! is off, the errors of a built one opened on something that does not exist (no panic, a
//! message naming what was wrong), and a ConnectX when one is named. AF_XDP and DPDK on veth
//! between namespaces are tested from C: tests/c/test_dp.c (run by tests/c/run.sh).
//!
//! ConnectX: `CORNFLAKES_MLX5_DEV=<mlx5_0 | PCI address>` opens it through `cf_dp_mlx5_new`;
//! `CORNFLAKES_MLX5_IP` (our address) and `CORNFLAKES_MLX5_PEER=ip:port` (a raw echo server,
//! e.g. `echo server --mode raw` on another host) add 100 round trips, as
//! crates/datapath-mlx5/tests/hardware.rs does for the Rust datapath.

use std::ffi::{CStr, CString};

use cornflakes_c::*;

fn last() -> String {
    // SAFETY: cf_last_error returns a valid NUL-terminated string owned by the library.
    unsafe { CStr::from_ptr(cf_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn kinds() -> Vec<String> {
    // SAFETY: cf_dp_kinds returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(cf_dp_kinds()) }
        .to_string_lossy()
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// Each datapath's open on something that does not exist: the status and the error message.
fn open_missing(kind: &str) -> (cf_status, String) {
    let mut dp = cf_dp { id: 0 };
    let s = match kind {
        "xdp" => cf_dp_xdp_new(
            c"cf-no-such-if".as_ptr(),
            c"10.0.0.1".as_ptr(),
            7000,
            std::ptr::null(),
            0,
            &mut dp,
        ),
        "mlx5" => cf_dp_mlx5_new(
            c"mlx5_cf_none".as_ptr(),
            c"10.0.0.1".as_ptr(),
            7000,
            0,
            0,
            &mut dp,
        ),
        // EAL arguments that name no port: refused before the EAL starts.
        "ice" => cf_dp_ice_new(c"-l 0".as_ptr(), c"10.0.0.1".as_ptr(), 7000, &mut dp),
        _ => unreachable!(),
    };
    assert_eq!(dp.id, 0, "{kind}: no handle on an error");
    (s, last())
}

#[test]
fn each_datapath_is_built_or_says_how_to_build_it() {
    let built = kinds();
    assert_eq!(built[0], "socket", "{built:?}");
    for (kind, on) in [
        ("xdp", cfg!(feature = "xdp")),
        ("mlx5", cfg!(feature = "mlx5")),
        ("ice", cfg!(feature = "ice")),
    ] {
        assert_eq!(built.iter().any(|k| k == kind), on, "{kind} in {built:?}");
        let (s, msg) = open_missing(kind);
        if on {
            assert_eq!(s, cf_status::CF_ERR_IO, "{kind}: {msg}");
            let names = match kind {
                "xdp" => "cf-no-such-if",
                "mlx5" => "mlx5_cf_none",
                _ => "name no device",
            };
            assert!(msg.contains(names), "{kind}: {msg}");
        } else {
            assert_eq!(s, cf_status::CF_ERR_UNSUPPORTED, "{kind}: {msg}");
            assert!(
                msg.contains(&format!("--features {kind}")) && msg.contains("APT_PACKAGES"),
                "{kind}: {msg}"
            );
        }
    }
    // SAFETY: cf_status_name returns a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(cf_status_name(cf_status::CF_ERR_UNSUPPORTED as i32)) };
    assert_eq!(name.to_str().unwrap(), "CF_ERR_UNSUPPORTED");
}

#[test]
fn bad_arguments_are_refused_before_opening() {
    let mut dp = cf_dp { id: 0 };
    assert_eq!(
        cf_dp_xdp_new(
            std::ptr::null(),
            c"10.0.0.1".as_ptr(),
            1,
            std::ptr::null(),
            0,
            &mut dp
        ),
        cf_status::CF_ERR_NULL
    );
    assert_eq!(
        cf_dp_mlx5_new(c"mlx5_0".as_ptr(), c"10.0.0".as_ptr(), 1, 0, 0, &mut dp),
        cf_status::CF_ERR_INVALID,
        "{}",
        last()
    );
    assert!(last().contains("10.0.0"), "{}", last());
    assert_eq!(
        cf_dp_ice_new(c"-l 0".as_ptr(), std::ptr::null(), 1, &mut dp),
        cf_status::CF_ERR_NULL
    );
    assert_eq!(dp.id, 0);
    // The socket datapath has a descriptor; what it says about itself.
    assert_eq!(
        cf_dp_socket_new(c"127.0.0.1".as_ptr(), 0, &mut dp),
        cf_status::CF_OK
    );
    let mut kind = std::ptr::null();
    assert_eq!(cf_dp_kind(dp, &mut kind), cf_status::CF_OK);
    // SAFETY: a static string from the library.
    assert_eq!(unsafe { CStr::from_ptr(kind) }.to_str().unwrap(), "socket");
    let mut fd = -1;
    assert_eq!(cf_dp_fd(dp, &mut fd), cf_status::CF_OK);
    assert!(fd >= 0);
    let mut n = 1usize;
    assert_eq!(cf_dp_in_flight(dp, &mut n), cf_status::CF_OK);
    assert_eq!(n, 0);
    assert_eq!(cf_dp_max_message_len(dp, &mut n), cf_status::CF_OK);
    assert!(n >= 16384);
    assert_eq!(cf_dp_release(dp), cf_status::CF_OK);
    assert_eq!(cf_dp_kind(dp, &mut kind), cf_status::CF_ERR_BAD_HANDLE);
}

/// The NIC opens' options: an MTU no host takes is refused before anything opens, whatever
/// the build; NULL options are the defaults; the plain and the `_opts` open of a NIC fail alike
/// on a device that does not exist (or in a build without it), and hand out no handle.
#[test]
fn nic_options_are_checked_before_opening() {
    let mut dp = cf_dp { id: 0 };
    for mtu in [100, 70_000] {
        let opts = cf_nic_opts {
            mtu,
            ..cf_nic_opts::default()
        };
        let s = cf_dp_mlx5_new_opts(
            c"mlx5_cf_none".as_ptr(),
            c"10.0.0.1".as_ptr(),
            7000,
            &opts,
            &mut dp,
        );
        assert_eq!(s, cf_status::CF_ERR_INVALID, "{}", last());
        assert!(
            last().contains(&format!("mtu {mtu} is outside 576..=65535")),
            "{}",
            last()
        );
        let s = cf_dp_ice_new_opts(c"-l 0".as_ptr(), c"10.0.0.1".as_ptr(), 7000, &opts, &mut dp);
        assert_eq!(s, cf_status::CF_ERR_INVALID, "{}", last());
    }
    assert_eq!(
        cf_dp_mlx5_new_opts(
            std::ptr::null(),
            c"10.0.0.1".as_ptr(),
            7000,
            std::ptr::null(),
            &mut dp
        ),
        cf_status::CF_ERR_NULL
    );
    // Nowhere to put the handle: refused before the device is touched, in every build.
    let s = cf_dp_ice_new_opts(
        c"-l 0".as_ptr(),
        c"10.0.0.1".as_ptr(),
        7000,
        std::ptr::null(),
        std::ptr::null_mut(),
    );
    assert_eq!(s, cf_status::CF_ERR_NULL, "{}", last());
    let (plain, plain_msg) = open_missing("mlx5");
    let opts = cf_nic_opts {
        mtu: 9000,
        max_item: 1 << 16,
        extra_bytes: 1 << 20,
    };
    for opts in [std::ptr::null(), &opts as *const cf_nic_opts] {
        let s = cf_dp_mlx5_new_opts(
            c"mlx5_cf_none".as_ptr(),
            c"10.0.0.1".as_ptr(),
            7000,
            opts,
            &mut dp,
        );
        // The same error, but for the function's name the message starts with.
        let msg = last().replacen("cf_dp_mlx5_new_opts:", "cf_dp_mlx5_new:", 1);
        assert_eq!((s, msg), (plain, plain_msg.clone()));
    }
    let (plain, _) = open_missing("ice");
    let s = cf_dp_ice_new_opts(
        c"-l 0".as_ptr(),
        c"10.0.0.1".as_ptr(),
        7000,
        std::ptr::null(),
        &mut dp,
    );
    assert_eq!(s, plain, "{}", last());
    assert_eq!(dp.id, 0, "no handle on an error");
}

#[test]
fn connectx_through_the_c_api() {
    const TEST: &str = "connectx_through_the_c_api";
    if !cfg!(feature = "mlx5") {
        test_skip::skip_unless(
            TEST,
            "built without the `mlx5` feature (cargo test -p cornflakes-c --features mlx5)",
            Some("CORNFLAKES_REQUIRE_MLX5"),
        );
        return;
    }
    let Some(dev) = std::env::var("CORNFLAKES_MLX5_DEV")
        .ok()
        .filter(|d| !d.is_empty())
    else {
        test_skip::skip_unless(
            TEST,
            "no ConnectX named; set CORNFLAKES_MLX5_DEV=<mlx5_0 | PCI address> to run it",
            Some("CORNFLAKES_REQUIRE_MLX5"),
        );
        return;
    };
    let ip = std::env::var("CORNFLAKES_MLX5_IP").unwrap_or_else(|_| "192.0.2.1".into());
    let (dev_c, ip_c) = (CString::new(dev).unwrap(), CString::new(ip).unwrap());
    let mut dp = cf_dp { id: 0 };
    let s = cf_dp_mlx5_new(dev_c.as_ptr(), ip_c.as_ptr(), 4791, 0, 0, &mut dp);
    assert_eq!(s, cf_status::CF_OK, "{}", last());
    let mut fd = 0;
    assert_eq!(cf_dp_fd(dp, &mut fd), cf_status::CF_ERR_UNSUPPORTED);
    let Some(peer) = std::env::var("CORNFLAKES_MLX5_PEER")
        .ok()
        .and_then(|p| p.parse::<std::net::SocketAddrV4>().ok())
    else {
        assert_eq!(cf_dp_release(dp), cf_status::CF_OK);
        test_skip::skip(
            "connectx_through_the_c_api: the echo round trips",
            "set CORNFLAKES_MLX5_IP and CORNFLAKES_MLX5_PEER=ip:port of a raw echo server",
        );
        return;
    };
    let peer_ip = CString::new(peer.ip().to_string()).unwrap();
    let mut conn = 0u32;
    assert_eq!(
        cf_dp_connect(dp, peer_ip.as_ptr(), peer.port(), &mut conn),
        cf_status::CF_OK
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (mut sent, mut got) = (0u32, 0usize);
    let mut rx = [cf_rx::default(); 32];
    while got < 100 && std::time::Instant::now() < deadline {
        if sent < 100 {
            let body = sent.to_le_bytes();
            match cf_dp_send_copy(dp, conn, 0, sent, 1, body.as_ptr(), body.len()) {
                cf_status::CF_OK => sent += 1,
                cf_status::CF_ERR_AGAIN => {}
                s => panic!("send: {s:?} {}", last()),
            }
        }
        assert_eq!(cf_dp_flush(dp), cf_status::CF_OK);
        let mut n = 0;
        assert_eq!(
            cf_dp_recv(dp, rx.as_mut_ptr(), rx.len(), &mut n),
            cf_status::CF_OK
        );
        for r in &rx[..n] {
            assert_eq!(cf_buf_release(r.data), cf_status::CF_OK);
        }
        got += n;
    }
    assert_eq!(cf_dp_release(dp), cf_status::CF_OK);
    assert_eq!(got, 100, "echoes received");
}
