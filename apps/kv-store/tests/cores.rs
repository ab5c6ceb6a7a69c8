//! Two share-nothing KV server cores, one port each, over the socket datapath (two pinned
//! threads) and over a loopback NIC with two queue pairs (polled in turn), with a client that
//! steers every request to the core owning its key (`docs/cores.md`): every request is
//! answered by its key's core, split getm/putm replies merge to the right answer, and the
//! per-core counters show no request lost, duplicated or served by the wrong shard.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes::datapath::Receive;
use cornflakes::{Arena, ConnId, Datapath, Msg, RxMsg};
use datapath_socket::{SocketConfig, SocketDatapath};
use kv_store::client::{decode_reply, send_op};
use kv_store::server::{Kv, KvServer, ServerConfig, ServerHandle, ServerStats, ShardLoader};
use kv_store::steer::{core_of, merge, split};
use kv_store::{Op, OpKind, Reply, Serialization, Shared, Status};
use percore::CoresConfig;

const KEYS: usize = 64;
const CORES: usize = 2;

fn key(i: usize) -> String {
    format!("key-{i}")
}

fn val(k: &str) -> Vec<u8> {
    format!("value of {k}").into_bytes()
}

/// Sends `op` split per core, waits for every part's reply, checks each came from its core,
/// and returns the merged reply. `sent` counts the requests each core was sent.
struct Client<D: Datapath> {
    dp: D,
    conns: Vec<ConnId>,
    ser: Serialization,
    arena: Arena,
    buf: Vec<u8>,
    next_id: u32,
    sent: Vec<u64>,
}

impl<D: Datapath> Client<D> {
    /// A client over `dp` of the server cores at `cores` (core *i* at `cores[i]`).
    fn new(mut dp: D, cores: &[SocketAddrV4], ser: Serialization) -> Self {
        let conns = dp.connect_all(cores).unwrap();
        Client {
            dp,
            conns,
            ser,
            arena: Arena::new(),
            buf: Vec::new(),
            next_id: 0,
            sent: vec![0; cores.len()],
        }
    }

    fn send_to(&mut self, core: usize, op: &Op) -> u32 {
        self.next_id += 1;
        let msg = Msg::new(self.next_id, OpKind::of(op).msg_type());
        let conn = self.conns[core];
        send_op(
            &mut self.dp,
            conn,
            msg,
            self.ser,
            op,
            &mut self.arena,
            &mut self.buf,
        )
        .unwrap();
        self.sent[core] += 1;
        self.next_id
    }

    /// Waits for the replies `want`s; `pump` runs the server cores between polls when they
    /// share this thread (the loopback NIC).
    fn wait(
        &mut self,
        want: &HashMap<u32, (usize, OpKind)>,
        pump: &mut dyn FnMut(),
    ) -> HashMap<u32, Reply> {
        self.dp.flush().unwrap();
        self.dp.poll_completions();
        let mut got = HashMap::new();
        let mut rx: Vec<RxMsg> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < want.len() {
            assert!(
                Instant::now() < deadline,
                "replies lost: {got:?} of {want:?}"
            );
            pump();
            rx.clear();
            self.dp.recv_burst(&mut rx).unwrap();
            for m in &rx {
                let (core, kind) = want[&m.msg.id];
                assert_eq!(
                    m.conn, self.conns[core],
                    "request {} answered by another core than its key's ({core})",
                    m.msg.id
                );
                let (_, reply) = decode_reply(self.ser, kind, &m.data).unwrap();
                assert!(
                    got.insert(m.msg.id, reply).is_none(),
                    "reply {} twice",
                    m.msg.id
                );
            }
            if rx.is_empty() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        got
    }

    fn call(&mut self, op: &Op, pump: &mut dyn FnMut()) -> Reply {
        let parts = split(op, self.conns.len());
        let mut want = HashMap::new();
        let ids: Vec<u32> = parts
            .iter()
            .map(|p| {
                let id = self.send_to(p.core, &p.op);
                want.insert(id, (p.core, OpKind::of(&p.op)));
                id
            })
            .collect();
        let mut got = self.wait(&want, pump);
        let replies = ids.iter().map(|id| got.remove(id).unwrap()).collect();
        merge(op, &parts, replies).unwrap()
    }
}

/// The requests both rigs run: every key, writes, a getm and a putm over both cores.
fn exercise<D: Datapath>(c: &mut Client<D>, pump: &mut dyn FnMut()) {
    // Every key from its own core.
    for i in 0..KEYS {
        let k = key(i);
        let r = c.call(&Op::Get { key: k.clone() }, pump);
        assert_eq!((r.status, r.vals), (Status::Ok, vec![val(&k)]), "{k}");
    }
    // Writes land in the owner's shard, and are read back from it.
    for i in (0..KEYS).step_by(5) {
        let k = key(i);
        let r = c.call(
            &Op::Put {
                key: k.clone(),
                val: b"new".to_vec(),
            },
            pump,
        );
        assert_eq!(r.status, Status::Ok);
    }
    // A getm over both cores' keys (and a missing one), split and merged in key order.
    let keys: Vec<String> = (0..12).map(key).chain([String::from("absent")]).collect();
    let r = c.call(&Op::GetM { keys: keys.clone() }, pump);
    assert_eq!(r.status, Status::NotFound);
    for (i, k) in keys.iter().enumerate() {
        if k == "absent" {
            assert_eq!(r.statuses[i], Status::NotFound);
        } else {
            let want = if i % 5 == 0 { b"new".to_vec() } else { val(k) };
            assert_eq!((r.statuses[i], &r.vals[i]), (Status::Ok, &want), "{k}");
        }
    }
    // A putm over both cores, then read back.
    let pk: Vec<String> = (20..30).map(key).collect();
    let r = c.call(
        &Op::PutM {
            keys: pk.clone(),
            vals: pk.iter().map(|k| k.as_bytes().to_vec()).collect(),
        },
        pump,
    );
    assert_eq!(r.status, Status::Ok);
    let r = c.call(&Op::GetM { keys: pk.clone() }, pump);
    assert_eq!(r.status, Status::Ok);
    assert_eq!(
        r.vals,
        pk.iter().map(|k| k.as_bytes().to_vec()).collect::<Vec<_>>()
    );
}

/// Two socket server cores loaded by `load`, and a client of both; `None` (after saying
/// SKIPPED) with fewer than 2 CPUs.
fn start(ser: Serialization, load: ShardLoader) -> Option<(ServerHandle, Client<SocketDatapath>)> {
    let n = percore::allowed_cores().unwrap().len();
    if n < CORES {
        test_skip::skip(
            &format!("two socket server cores ({ser:?})"),
            &format!("two server cores need 2 CPUs, this process may use {n}"),
        );
        return None;
    }
    let bind = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    let server = kv_store::server::spawn_cores(
        ServerConfig::new(ser),
        SocketConfig::new(bind),
        &CoresConfig::new("kv-test", CORES),
        load,
        None,
        false,
    )
    .unwrap();
    let addrs = server.addrs();
    assert_eq!(addrs.len(), CORES);
    assert_ne!(addrs[0].port(), addrs[1].port(), "one port per core");
    let dp = SocketDatapath::new(SocketConfig::new(bind)).unwrap();
    Some((server, Client::new(dp, &addrs, ser)))
}

fn run(ser: Serialization) {
    let Some((server, mut c)) = start(ser, Arc::new(load_shard)) else {
        return;
    };

    exercise(&mut c, &mut || {});
    let sent = c.sent.clone();
    assert!(sent.iter().all(|&s| s > 0), "both cores served: {sent:?}");

    check_cores(&server.stop_per_core().unwrap(), &sent);
}

/// Each core received and answered exactly what the client sent it, touched only its own
/// shard, and holds exactly its keys.
fn check_cores(per_core: &[ServerStats], sent: &[u64]) {
    for (core, s) in per_core.iter().enumerate() {
        assert_eq!(s.received, sent[core], "core {core}: {s}");
        assert_eq!(s.replied, sent[core], "core {core}: {s}");
        assert_eq!(s.malformed + s.send_failed, 0, "core {core}: {s}");
        assert_eq!(s.app.foreign, 0, "core {core} touched another shard: {s}");
        let owned = (0..KEYS)
            .filter(|&i| core_of(&key(i), CORES) == core)
            .count()
            + (20..30)
                .filter(|&i| i >= KEYS && core_of(&key(i), CORES) == core)
                .count();
        assert_eq!(s.app.keys, owned, "core {core} holds only its shard");
    }
    let total = ServerStats::sum(per_core);
    assert_eq!(total.received, sent.iter().sum::<u64>());
}

fn load_shard(
    store: &mut kv_store::store::Store,
    core: usize,
    cores: usize,
) -> Result<String, String> {
    let mut loaded = 0;
    for i in 0..KEYS {
        let k = key(i);
        if core_of(&k, cores) == core {
            store.put(&k, &val(&k)).map_err(|s| format!("{k}: {s:?}"))?;
            loaded += 1;
        }
    }
    Ok(format!("{loaded} keys"))
}

/// The same requests over a loopback NIC with two queue pairs, one KV server core per queue
/// (each its own memory, stack, connection table and shard), steered by destination port.
/// The link is single-threaded, so the two cores are polled in turn on this thread.
#[test]
fn two_loopback_queues_answer_each_key_from_its_own_core() {
    use cornflakes_stack::{MacAddr, StackConfig};
    use datapath_loopback::{Loopback, LoopbackConfig};
    let mac = MacAddr([2, 0, 0, 0, 0, 1]);
    let queue = |q: usize| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000 + q as u16);
    let client = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9000);
    let queues = (0..CORES)
        .map(|q| LoopbackConfig::new(StackConfig::new(mac, queue(q))))
        .collect();
    let (c_dp, qs) = Loopback::multi_queue(
        LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), client)),
        queues,
    )
    .unwrap();
    let mut servers: Vec<KvServer<Loopback>> = qs
        .into_iter()
        .enumerate()
        .map(|(q, dp)| {
            let kv = Kv::new(
                cornflakes::datapath::DatapathMemory::memory(&dp),
                ServerConfig::new(Serialization::Shared(Shared::CORNFLAKES)),
            )
            .with_core(q, CORES);
            let mut s = KvServer::new(dp, kv);
            load_shard(s.handler_mut().store_mut(), q, CORES).unwrap();
            s
        })
        .collect();
    let addrs: Vec<SocketAddrV4> = (0..CORES).map(queue).collect();
    let mut c = Client::new(c_dp, &addrs, Serialization::Shared(Shared::CORNFLAKES));
    // ARP: queue 0 answers for the shared address.
    let mut rx = Vec::new();
    for s in &mut servers {
        s.poll();
    }
    c.dp.recv_burst(&mut rx).unwrap();
    let cell = std::cell::RefCell::new(servers);
    exercise(&mut c, &mut || {
        for s in cell.borrow_mut().iter_mut() {
            s.poll();
        }
    });
    let sent = c.sent.clone();
    assert!(sent.iter().all(|&s| s > 0), "both cores served: {sent:?}");
    let per_core: Vec<ServerStats> = cell.borrow().iter().map(|s| s.stats()).collect();
    check_cores(&per_core, &sent);
}

#[test]
fn two_socket_cores_answer_each_key_from_its_own_core_cornflakes() {
    run(Serialization::Shared(Shared::CORNFLAKES));
}

#[test]
fn two_socket_cores_answer_each_key_from_its_own_core_protobuf() {
    run(Serialization::Shared(Shared::PROTOBUF));
}

#[test]
fn a_request_sent_to_the_wrong_core_is_counted_as_foreign() {
    let Some((server, mut c)) = start(
        Serialization::Shared(Shared::CORNFLAKES),
        Arc::new(|_, _, _| Ok(String::new())),
    ) else {
        return;
    };
    let k = key(0);
    let wrong = 1 - core_of(&k, CORES);
    let id = c.send_to(wrong, &Op::Get { key: k });
    let got = c.wait(&HashMap::from([(id, (wrong, OpKind::Get))]), &mut || {});
    assert_eq!(got[&id].status, Status::NotFound, "not in that shard");
    let per_core = server.stop_per_core().unwrap();
    assert_eq!(per_core[wrong].app.foreign, 1);
    assert_eq!(per_core[1 - wrong].received, 0);
}

/// `kv bench --datapath socket --cores 2` in-process: YCSB getm of 4 keys (most requests span
/// both cores, so they are split and merged), every reply verified, nothing lost, and the two
/// cores' counters add up to what the clients sent (split parts counted once per core).
#[test]
fn the_bench_drives_two_cores_with_key_steered_split_getms() {
    let n = percore::allowed_cores().unwrap().len();
    if n < CORES {
        test_skip::skip(
            "the_bench_drives_two_cores_with_key_steered_split_getms",
            &format!("two server cores need 2 CPUs, this process may use {n}"),
        );
        return;
    }
    use kv_store::bench::{run_bench, BenchConfig};
    use kv_workloads::{WorkloadConfig, YcsbAccess, YcsbConfig};
    use loadgen::args::LoadConfig;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kv-cores-{}", std::process::id()));
    let cfg = BenchConfig {
        workload: WorkloadConfig::Ycsb(YcsbConfig {
            keys: 500,
            values_per_request: 4,
            value_size: 256,
            access: YcsbAccess::GetM,
            ..YcsbConfig::default()
        }),
        serializations: vec![
            Serialization::Shared(Shared::CORNFLAKES),
            Serialization::Shared(Shared::FLATBUFFERS),
        ],
        load: LoadConfig {
            rates: vec![500.0],
            duration: Duration::from_millis(100),
            warmup: Duration::from_millis(20),
            timeout: Duration::from_secs(2),
            out_dir: dir.clone(),
            ..BenchConfig::default().load
        },
        requests: 400,
        cores: CORES,
        ..BenchConfig::default()
    };
    let out = run_bench(&cfg).unwrap();
    assert_eq!(out.records.len(), 2);
    for r in &out.records {
        assert!(r.verified > 0, "{r:?}");
        assert_eq!(
            (r.mismatched, r.lost, r.unexpected, r.malformed, r.errors),
            (0, 0, 0, 0, 0),
            "{r:?}"
        );
    }
    for (ser, s) in &out.servers {
        assert_eq!(s.app.foreign, 0, "{ser}: {s}");
        assert_eq!(
            s.app.keys, 500,
            "{ser}: the two shards hold every key once: {s}"
        );
        assert_eq!(s.replied, s.received, "{ser}: {s}");
        assert_eq!(s.malformed + s.send_failed, 0, "{ser}: {s}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
