//! Tests on a real ConnectX. They run when `CORNFLAKES_MLX5_DEV` names a device (verbs name or
//! PCI address) and print why they were skipped otherwise; the echo round trip also needs
//! `CORNFLAKES_MLX5_IP` (our IPv4 address) and `CORNFLAKES_MLX5_PEER` (an echo server's
//! `ip:port`, e.g. the echo app on another host). Built without the `mlx5` feature, the one
//! test here says so.

#[cfg(not(feature = "mlx5"))]
#[test]
fn hardware_tests_need_the_mlx5_feature() {
    test_skip::skip(
        "datapath-mlx5 hardware tests",
        "built without the `mlx5` feature (cargo test -p datapath-mlx5 --features mlx5)",
    );
}

#[cfg(feature = "mlx5")]
mod hw {
    use std::env;
    use std::io;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::time::{Duration, Instant};

    use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
    use cornflakes::handwritten::GetM;
    use cornflakes::mem::MemoryConfig;
    use cornflakes::{Arena, CFBytes, CFPtr, CornflakesObj, Msg, PinnedMemory, SendError};
    use cornflakes_stack::iface::StackConfig;
    use cornflakes_stack::wire::MacAddr;
    use datapath_mlx5::hw::{self, HwConfig};
    use datapath_mlx5::Mlx5Config;

    fn device() -> Option<String> {
        match env::var("CORNFLAKES_MLX5_DEV") {
            Ok(d) if !d.is_empty() => Some(d),
            _ => {
                test_skip::skip(
                    "datapath-mlx5 hardware tests",
                    "no ConnectX named; set CORNFLAKES_MLX5_DEV=<mlx5_0 | PCI address> to run them",
                );
                None
            }
        }
    }

    #[test]
    fn device_list_works_with_or_without_rdma() {
        // Without RDMA support (here: ENOSYS) the list is empty, not an error or a crash.
        let devs = hw::devices().expect("ibv_get_device_list");
        if devs.is_empty() {
            eprintln!("no RDMA devices (ibv_get_device_list found none, or ENOSYS: no uverbs)");
        } else {
            eprintln!("RDMA devices: {devs:?}");
        }
        if let Some(d) = device() {
            assert!(
                devs.iter()
                    .any(|x| x.name == d || x.pci.as_deref() == Some(d.as_str())),
                "CORNFLAKES_MLX5_DEV={d} is not among {devs:?}"
            );
        }
    }

    #[test]
    fn opening_a_missing_device_is_an_error() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let cfg = Mlx5Config::new(StackConfig::new(
            MacAddr::ZERO,
            SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 4791),
        ));
        let err = hw::open(&HwConfig::new("no-such-mlx5-device"), mem, cfg)
            .err()
            .expect("opening a device that does not exist fails");
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    }

    #[test]
    fn opening_a_core_of_a_missing_device_names_the_core() {
        // The per-core opening of the many-core server goes through the same checks; with
        // no ConnectX here it reaches `ibv_get_device_list` and fails cleanly.
        let base = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 7000);
        let err = hw::open_server_core("no-such-mlx5-device", base, 1, 1500, 0, 0)
            .err()
            .expect("opening a device that does not exist fails");
        assert!(err.starts_with("core 1: "), "{err}");
        assert!(err.contains("no-such-mlx5-device"), "{err}");
        let err = hw::open_server_core("no-such-mlx5-device", base, 70000, 1500, 0, 0)
            .err()
            .expect("a port beyond 65535 is refused");
        assert!(err.contains("65535"), "{err}");
    }

    #[test]
    fn spawning_cores_on_a_missing_device_names_the_core_and_serves_nothing() {
        // The many-core servers' spawner (`--datapath mlx5 --cores N`): each core opens its
        // own queue set on its own pinned thread; a failure stops the others and says which
        // core and device, and the caller's server never starts.
        let base = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 7000);
        let n = percore::allowed_cores().unwrap().len().min(2);
        let cc = percore::CoresConfig::new("mlx5-spawn-test", n);
        let served = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = served.clone();
        let err = hw::spawn_server_cores(
            "no-such-mlx5-device",
            base,
            1500,
            0,
            0,
            &cc,
            move |_, _, _, _| {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            },
        )
        .expect_err("spawning cores on a device that does not exist fails");
        assert!(
            (0..n).any(|i| err.starts_with(&format!("server core {i}: core {i}: "))),
            "{err}"
        );
        assert!(
            err.contains("opening ConnectX device \"no-such-mlx5-device\""),
            "{err}"
        );
        assert!(!served.load(std::sync::atomic::Ordering::Relaxed));
        // More cores than CPUs: refused before any device is opened.
        let cc = percore::CoresConfig::new(
            "mlx5-spawn-test",
            percore::allowed_cores().unwrap().len() + 1,
        );
        let err = hw::spawn_server_cores(
            "no-such-mlx5-device",
            base,
            1500,
            0,
            0,
            &cc,
            |_, _, _, _| Ok(()),
        )
        .expect_err("too many cores");
        assert!(err.contains("server cores asked for"), "{err}");
    }

    #[test]
    fn spawned_cores_on_hardware() {
        let Some(dev) = device() else { return };
        let Some(ip) = env::var("CORNFLAKES_MLX5_IP")
            .ok()
            .and_then(|s| s.parse().ok())
        else {
            test_skip::skip(
                "spawned_cores_on_hardware",
                "set CORNFLAKES_MLX5_IP as well",
            );
            return;
        };
        if percore::allowed_cores().unwrap().len() < 2 {
            test_skip::skip("spawned_cores_on_hardware", "two pinned cores need 2 CPUs");
            return;
        }
        let base = SocketAddrV4::new(ip, 7000);
        let cc = percore::CoresConfig::new("mlx5-spawn-test", 2);
        let running =
            hw::spawn_server_cores(&dev, base, 1500, 0, 0, &cc, |dp, core, ready, info| {
                let local = dp.local_addr();
                ready.ready(info);
                while !core.stop().load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(local)
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let ready = running.ready().to_vec();
        let local = running.stop().expect("cores stop");
        for i in 0..2 {
            let addr = SocketAddrV4::new(ip, 7000 + i as u16);
            assert_eq!(ready[i], (addr, format!("ConnectX {dev}, queue set {i}")));
            assert_eq!(local[i], addr);
        }
    }

    #[test]
    fn cores_of_one_port_on_hardware() {
        let Some(dev) = device() else { return };
        let ip: Ipv4Addr = match env::var("CORNFLAKES_MLX5_IP")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            Some(ip) => ip,
            None => {
                test_skip::skip(
                    "cores_of_one_port_on_hardware",
                    "set CORNFLAKES_MLX5_IP as well",
                );
                return;
            }
        };
        // Two cores, each opened on its own thread (the datapath is !Send): two QPs with one
        // flow rule each on the same port.
        let base = SocketAddrV4::new(ip, 7000);
        // Both QPs exist at once (each core waits for the other before dropping its own).
        let both = std::sync::Barrier::new(2);
        let caps: Vec<_> = std::thread::scope(|s| {
            let ts: Vec<_> = (0..2)
                .map(|core| {
                    let (dev, both) = (dev.clone(), &both);
                    s.spawn(move || {
                        let dp = hw::open_server_core(&dev, base, core, 1500, 0, 0);
                        both.wait();
                        let dp = dp.unwrap_or_else(|e| panic!("{e}"));
                        (dp.local_addr(), dp.caps())
                    })
                })
                .collect();
            ts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(caps[0].0.port(), 7000);
        assert_eq!(caps[1].0.port(), 7001);
    }

    #[test]
    fn open_register_and_echo_on_hardware() {
        let Some(dev) = device() else { return };
        let ip: Ipv4Addr = env::var("CORNFLAKES_MLX5_IP")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(Ipv4Addr::new(192, 0, 2, 1));
        let mem = PinnedMemory::new(MemoryConfig {
            max_item_size: 64 * 1024,
            ..MemoryConfig::default()
        })
        .unwrap();
        let cfg = Mlx5Config::new(StackConfig::new(MacAddr::ZERO, SocketAddrV4::new(ip, 4791)));
        let mut dp = hw::open(&HwConfig::new(dev), mem, cfg).expect("open the device");
        let mut regions = 0;
        dp.memory().for_each_region(|r| {
            assert!(
                r.registration().is_some(),
                "region {} has no lkey",
                r.index()
            );
            regions += 1;
        });
        assert!(regions > 0);
        assert!(dp.mtu() >= 576 && dp.max_segments() >= 2, "{:?}", dp.caps());
        assert!(dp.rx_posted() > 0);
        let Some(peer) = env::var("CORNFLAKES_MLX5_PEER")
            .ok()
            .and_then(|s| s.parse::<SocketAddrV4>().ok())
        else {
            test_skip::skip(
                "the echo round trip on hardware",
                "set CORNFLAKES_MLX5_IP and CORNFLAKES_MLX5_PEER=ip:port of an echo server",
            );
            return;
        };
        let conn = dp.connect(peer).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mem = dp.memory().clone();
        let value = mem.alloc_copy(&[0xab; 1024]).unwrap();
        let mut got = 0;
        let mut sent = 0;
        let mut out = Vec::new();
        while got < 100 && Instant::now() < deadline {
            if sent < 100 {
                let arena = Arena::with_memory(&mem);
                let mut m = GetM::new_in(&arena);
                m.set_id(sent);
                m.init_vals(1);
                m.get_mut_vals()
                    .append(CFBytes(CFPtr::from_rcbuf(value.clone(), &arena)));
                match dp.send_object(conn, Msg::new(sent, 1), &m) {
                    Ok(()) => sent += 1,
                    Err(SendError::Resolving(_)) | Err(SendError::Full) => {}
                    Err(e) => panic!("send: {e}"),
                }
                let _ = m.sizes();
            }
            dp.flush().unwrap();
            dp.poll_completions();
            out.clear();
            dp.recv_burst(&mut out).unwrap();
            got += out.len();
        }
        assert_eq!(got, 100, "echoes received; stats {:?}", dp.stats());
    }
}
