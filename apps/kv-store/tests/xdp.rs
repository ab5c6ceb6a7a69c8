//! The KV server over AF_XDP (feature `xdp`, root): `kv server --datapath xdp` in a network
//! namespace on one end of a veth pair, a client on kernel sockets at the other end, every
//! request type in every serialization with byte-exact replies; and `kv bench --datapath xdp`
//! end to end. Without root (or `ip`/`ethtool`) each test says SKIPPED on stderr, and fails
//! instead when `CORNFLAKES_REQUIRE_XDP=1`. The namespaces are removed again.
#![cfg(feature = "xdp")]

mod common;

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cornflakes::datapath::{Connect, Receive, Transmit};
use cornflakes::{Msg, RxMsg};
use datapath_socket::{SocketConfig, SocketDatapath};
use kv_store::client::decode_reply;
use kv_store::server::memory_config;
use kv_store::xdp::{parse_stats, READY, SUITE};
use netns_harness::Suite;

/// The direct test's own names; its subnet, like every suite's, is leased from
/// `netns_harness::subnet`, so the host-side routes of tests running at once never overlap.
const DIRECT: Suite = Suite::new("cfkvt", "ckt", "CORNFLAKES_REQUIRE_XDP");
use kv_store::{Op, OpKind, Reply, Serialization, Shared};
use netns_harness::{ChildServer, HostVeth};

fn namespace_exists(name: &str) -> bool {
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// One request at a time to a server, waiting for its reply.
struct Client {
    dp: SocketDatapath,
    ser: Serialization,
    requests: common::Requests,
}

impl Client {
    fn call(&mut self, op: &Op) -> Reply {
        let msg = self.requests.send(&mut self.dp, op);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut rx: Vec<RxMsg> = Vec::new();
        loop {
            self.dp.recv_burst(&mut rx).unwrap();
            if let Some(m) = rx.iter().find(|m| m.msg == msg) {
                // From the address and port the request went to (a server core answers from
                // its own port; a reply from another would be another connection).
                assert_eq!(m.conn, self.requests.conn, "{}: reply to {op:?}", self.ser);
                let (id, reply) = decode_reply(self.ser, OpKind::of(op), &m.data)
                    .unwrap_or_else(|e| panic!("{} {op:?}: {e}", self.ser));
                if let Some(id) = id {
                    assert_eq!(id, msg.id);
                }
                return reply;
            }
            rx.clear();
            assert!(
                Instant::now() < deadline,
                "{}: no reply to {op:?} within 5 s",
                self.ser
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[test]
fn every_request_in_every_serialization_over_af_xdp() {
    let test = "every_request_in_every_serialization_over_af_xdp";
    if let Some(why) = DIRECT.xdp_skip_reason() {
        DIRECT.skip(test, &why);
        return;
    }
    let ns = HostVeth::create(&DIRECT, 9000).expect("namespace and veth");
    let name = ns.name.clone();
    let exe = Path::new(env!("CARGO_BIN_EXE_kv"));
    for (i, ser) in Serialization::ALL.into_iter().enumerate() {
        let args = ["server", "--serialization", ser.name(), "--memory-limit"]
            .map(str::to_owned)
            .into_iter()
            .chain([(32usize << 20).to_string()])
            .collect::<Vec<_>>();
        let server = ChildServer::spawn(
            &ns,
            exe,
            &args,
            7000 + i as u16,
            READY,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{ser}: {e}"));
        let mut sc = SocketConfig::new(SocketAddrV4::new(ns.client_ip, 0));
        sc.mtu = 9000;
        sc.memory = memory_config(16 * 1024, 64 << 20);
        let mut dp = SocketDatapath::new(sc).unwrap();
        let conn = dp.connect(server.addr).unwrap();
        let mut client = Client {
            dp,
            ser,
            requests: common::Requests::new(conn, ser),
        };
        common::every_request(ser, &mut |op| client.call(op));
        // A malformed request is counted and dropped; the server keeps answering.
        client
            .dp
            .send_copy(conn, Msg::new(999, OpKind::Get.msg_type()), &[0xff; 7])
            .unwrap();
        client.dp.flush().unwrap();
        assert_eq!(
            client.call(&Op::Get {
                key: common::k("nope")
            }),
            common::st(kv_store::Status::NotFound)
        );
        let stats = parse_stats(&server.stop().unwrap_or_else(|e| panic!("{ser}: {e}")));
        assert_eq!(stats.malformed, 1, "{ser}: {stats}");
        assert_eq!(stats.send_failed, 0, "{ser}: {stats}");
        assert_eq!(stats.received, stats.replied + 1, "{ser}: {stats}");
    }
    drop(ns);
    assert!(!namespace_exists(&name), "{name} left behind");
}

#[test]
fn bench_over_af_xdp_verifies_every_reply_and_removes_its_namespace() {
    let test = "bench_over_af_xdp_verifies_every_reply_and_removes_its_namespace";
    if let Some(why) = SUITE.xdp_skip_reason() {
        SUITE.skip(test, &why);
        return;
    }
    let dir: PathBuf =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("kv-xdp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sers = ["cornflakes", "capnp", "resp"];
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["bench", "--datapath", "xdp", "--workload", "google"])
        .args(["--keys", "200", "--list-lens", "1-4", "--requests", "500"])
        .args(["--serializations", &sers.join(",")])
        .args(["--rates", "300", "--duration", "0.2", "--warmup", "0.05"])
        .args(["--timeout-ms", "3000", "--memory-limit", "33554432"])
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run kv bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kv bench --datapath xdp failed:\n{stderr}"
    );
    let recs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
    for s in sers {
        let r = recs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["mode"] == s)
            .unwrap_or_else(|| panic!("no record for {s}"));
        assert!(
            r["verified"].as_u64().unwrap() > 0,
            "{s}: nothing verified: {r}"
        );
        assert_eq!(r["verified"], r["sent"], "{s}: every reply verified: {r}");
        assert_eq!(r["mismatched"], 0, "{s}: {r}");
    }
    // Driven by an AF_XDP client core on the host's end, one per server, as said.
    assert!(stderr.contains("(an AF_XDP client core, "), "{stderr}");
    let ready = stderr.matches("[client] core 0 ready at ").count();
    assert_eq!(ready, sers.len(), "{stderr}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert!(
        run["datapath"]
            .as_str()
            .unwrap()
            .contains("AF_XDP client core"),
        "{run}"
    );
    let servers = run["servers"].as_array().unwrap();
    assert_eq!(servers.len(), sers.len());
    assert!(
        servers
            .iter()
            .all(|s| s["keys"] == 200 && s["malformed"] == 0),
        "each child server loaded the workload: {run}"
    );
    let tables = std::fs::read_to_string(dir.join("tables.md")).unwrap();
    assert!(
        tables.contains("driven by one AF_XDP client core"),
        "{tables}"
    );
    let name = stderr
        .split("[bench] namespace ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .expect("namespace reported");
    assert!(!namespace_exists(name), "{name} left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_over_af_xdp_can_be_driven_by_kernel_socket_clients() {
    let test = "bench_over_af_xdp_can_be_driven_by_kernel_socket_clients";
    if let Some(why) = SUITE.xdp_skip_reason() {
        SUITE.skip(test, &why);
        return;
    }
    let dir: PathBuf = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kv-xdp-socket-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["bench", "--datapath", "xdp", "--client-datapath", "socket"])
        .args(["--workload", "ycsb", "--keys", "200", "--shape", "1x512"])
        .args(["--serializations", "cornflakes", "--threads", "2"])
        .args(["--rates", "300", "--duration", "0.2", "--warmup", "0.05"])
        .args(["--timeout-ms", "3000", "--requests", "500"])
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run kv bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("(2 kernel-socket client thread(s), "),
        "{stderr}"
    );
    assert!(!stderr.contains("[client] core"), "{stderr}");
    let recs = loadgen::read_json(&dir.join("kv.json")).unwrap();
    assert!(
        recs.iter().all(|r| r.verified > 0 && r.mismatched == 0),
        "{recs:?}"
    );
    let tables = std::fs::read_to_string(dir.join("tables.md")).unwrap();
    assert!(tables.contains("clients on kernel UDP sockets"), "{tables}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kv_client_reaches_a_server_on_another_address() {
    // `kv client` against a `kv server` that is not on 127.0.0.1 (here: AF_XDP behind a veth,
    // as a server on another machine would be): its sockets must not be bound to loopback.
    let test = "kv_client_reaches_a_server_on_another_address";
    const CLIENT: Suite = Suite::new("cfkvc", "ckc", "CORNFLAKES_REQUIRE_XDP");
    if let Some(why) = CLIENT.xdp_skip_reason() {
        CLIENT.skip(test, &why);
        return;
    }
    let ns = HostVeth::create(&CLIENT, 9000).expect("namespace and veth");
    let workload = ["--workload", "ycsb", "--keys", "300"].map(str::to_owned);
    let args: Vec<String> = ["server", "--serialization", "protobuf"]
        .map(str::to_owned)
        .into_iter()
        .chain(workload.clone())
        .chain(["--memory-limit".to_owned(), (32usize << 20).to_string()])
        // Below the veth's 9000: the server must take --mtu, not the interface's.
        .chain(["--mtu".to_owned(), "4000".to_owned()])
        .collect();
    let exe = Path::new(env!("CARGO_BIN_EXE_kv"));
    let server = ChildServer::spawn(&ns, exe, &args, 7100, READY, Duration::from_secs(30))
        .expect("server up");
    let ready = server.startup_lines().last().cloned().unwrap_or_default();
    assert!(ready.contains("IP MTU 4000"), "{ready}");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kv-xdp-client-{}", std::process::id()));
    let out = Command::new(exe)
        .args(["client", "--server", &server.addr.to_string()])
        .args(["--serialization", "protobuf"])
        .args(&workload)
        .args(["--rates", "300", "--duration", "0.2", "--warmup", "0.05"])
        .args(["--timeout-ms", "3000", "--out"])
        .arg(&dir)
        .output()
        .expect("run kv client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kv client failed:\n{stderr}");
    let recs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("kv.json")).unwrap()).unwrap();
    let r = &recs.as_array().unwrap()[0];
    assert!(r["verified"].as_u64().unwrap() > 0, "{r}\n{stderr}");
    assert_eq!(
        (r["mismatched"].as_u64(), r["lost"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    let stats = parse_stats(&server.stop().unwrap());
    assert!(stats.replied > 0, "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two KV cores over AF_XDP (`kv server --datapath xdp --cores 2`): a veth with 2 queues, the
/// server end in a namespace, XPS on the client end so a client thread pinned to CPU *i*
/// reaches queue *i*, where core *i*'s AF_XDP socket is (the XDP program redirects port
/// `BASE + i` on queue *i*). Core *i*'s client thread puts, gets and getm's every key core
/// *i* owns (`steer::core_of(key, 2)`) at port `BASE + i`: every reply must come from that
/// core's port, once; the per-core counters must equal what each core was sent, each shard
/// hold exactly its keys, and no key be foreign but the one request deliberately sent to the
/// wrong core.
#[test]
fn two_af_xdp_cores_answer_each_key_from_its_owner() {
    const CORES: Suite = Suite::new("cfkvq", "ckq", "CORNFLAKES_REQUIRE_XDP");
    const BASE: u16 = 7200;
    const N: usize = 2;
    let test = "two_af_xdp_cores_answer_each_key_from_its_owner";
    if let Some(why) = CORES.xdp_skip_reason() {
        CORES.skip(test, &why);
        return;
    }
    let cpus = percore::allowed_cores().unwrap();
    if cpus.len() < N {
        CORES.skip(
            test,
            &format!("two server cores need 2 CPUs, have {cpus:?}"),
        );
        return;
    }
    let ns = HostVeth::create_with_queues(&CORES, 1500, N as u32).expect("namespace, 2 queues");
    let name = ns.name.clone();
    ns.map_tx_queues_to_cpus(&cpus[..N])
        .expect("XPS on the client end");
    let ser = Serialization::Shared(Shared::CORNFLAKES);
    let args: Vec<String> = ["server", "--serialization", ser.name(), "--cores", "2"]
        .map(str::to_owned)
        .into_iter()
        .chain(["--memory-limit".to_owned(), (16usize << 20).to_string()])
        .collect();
    let exe = Path::new(env!("CARGO_BIN_EXE_kv"));
    let server = ChildServer::spawn(&ns, exe, &args, BASE, READY, Duration::from_secs(30))
        .expect("two server cores up");
    let keys: Vec<String> = (0..120).map(|i| format!("key-{i}")).collect();
    let owned = |core: usize| -> Vec<String> {
        keys.iter()
            .filter(|k| kv_store::steer::core_of(k, N) == core)
            .cloned()
            .collect()
    };
    let (client_ip, server_ip) = (ns.client_ip, ns.server_ip);
    // A key of core 1, sent (once, by core 0's client) to core 0.
    let stray = owned(1).into_iter().next().unwrap();
    // Client thread `core` runs on the CPU whose transmit queue reaches core `core`'s queue.
    let results: Vec<u64> = netns_harness::host::on_queue_cpus(&cpus[..N], |core| {
        let mine = owned(core);
        let to = SocketAddrV4::new(server_ip, BASE + core as u16);
        let mut sc = SocketConfig::new(SocketAddrV4::new(client_ip, 0));
        sc.memory = memory_config(16 * 1024, 16 << 20);
        let mut dp = SocketDatapath::new(sc).unwrap();
        let conn = dp.connect(to).unwrap();
        let mut c = Client {
            dp,
            ser,
            requests: common::Requests::new(conn, ser),
        };
        let mut sent = 0u64;
        let mut call = |op: &Op| {
            sent += 1;
            // `Client::call` checks the reply came on this connection: from this
            // core's address and port.
            c.call(op)
        };
        for k in &mine {
            let put = Op::Put {
                key: k.clone(),
                val: format!("value of {k}").into_bytes(),
            };
            assert_eq!(call(&put), common::st(kv_store::Status::Ok), "{k}");
        }
        for k in &mine {
            let want = common::ok(vec![format!("value of {k}").into_bytes()]);
            assert_eq!(call(&Op::Get { key: k.clone() }), want, "{k}");
        }
        let getm = Op::GetM {
            keys: mine[..8].to_vec(),
        };
        let mut want = common::ok(
            mine[..8]
                .iter()
                .map(|k| format!("value of {k}").into_bytes())
                .collect(),
        );
        want.statuses = vec![kv_store::Status::Ok; 8];
        assert_eq!(call(&getm), want);
        if core == 0 {
            // Not this core's key: its shard does not have it, and counts it.
            let r = call(&Op::Get { key: stray.clone() });
            assert_eq!(r, common::st(kv_store::Status::NotFound));
        }
        // Nothing else may arrive: no request answered twice.
        std::thread::sleep(Duration::from_millis(200));
        let mut rx: Vec<RxMsg> = Vec::new();
        c.dp.recv_burst(&mut rx).unwrap();
        assert!(rx.is_empty(), "core {core}: {} extra replies", rx.len());
        sent
    })
    .expect("one client thread per queue, pinned");
    let lines = server.stop().expect("the server exits cleanly");
    let per_core = kv_store::xdp::parse_core_stats(&lines);
    assert_eq!(per_core.len(), N, "{lines:#?}");
    for (core, st) in per_core.iter().enumerate() {
        let foreign = u64::from(core == 0);
        assert_eq!(st.received, results[core], "core {core}: {st}");
        assert_eq!(st.replied, results[core], "core {core}: {st}");
        assert_eq!(st.malformed, 0, "core {core}: {st}");
        assert_eq!(st.app.foreign, foreign, "core {core}: {st}");
        assert_eq!(st.app.keys, owned(core).len(), "core {core}: {st}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[server] XDP program:") && l.ends_with("misteered=0")),
        "{lines:#?}"
    );
    drop(ns);
    assert!(!namespace_exists(&name), "{name} left behind");
}
