//! The KV load generator's client over the ConnectX driver (`datapath-mlx5`) on the emulated
//! device's rings, against the KV server on a second emulated ConnectX linked to it: what
//! `kv client --datapath mlx5` runs on each client core, short of the hardware (which has not
//! run). The client resolves the server by ARP through the emulated wire (`Connect::resolved`),
//! sends open-loop requests, and every reply is verified by the checker `kv client` uses; the
//! datapath is then taken back and a second client with a fresh identity runs on it, as a
//! client core does between load points. Stepped by hand: each device moves frames when told.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use app_server::Handler;
use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::mem::{MemoryConfig, PinnedMemory};
use cornflakes::{ConnId, RxMsg};
use cornflakes_stack::iface::StackConfig;
use cornflakes_stack::wire::MacAddr;
use datapath_mlx5::emu::{EmuConfig, EmuNic, EmuQueues};
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};
use kv_store::client::{Checker, Expected, KvClient, RunRequests};
use kv_store::server::{Kv, ServerConfig};
use kv_store::{Op, Serialization};
use loadgen::{request_id, ClientTransport};

const SERVER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const CLIENT_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9000);

type Dp = Mlx5Datapath<EmuQueues>;

/// One emulated ConnectX and the driver over it at `me`; a static ARP entry for `peer` if given.
fn node(mac: MacAddr, me: SocketAddrV4, peer: Option<(Ipv4Addr, MacAddr)>) -> (EmuNic, Dp) {
    let nic = EmuNic::new(EmuConfig::default()).expect("emulated device");
    let mem = PinnedMemory::new(MemoryConfig {
        max_item_size: 64 * 1024,
        ..MemoryConfig::default()
    })
    .expect("pinned memory");
    nic.register(&mem).expect("register");
    nic.set_flows(&flow_rules(mac, me.port()));
    let mut scfg = StackConfig::new(mac, me);
    scfg.static_arp = peer.into_iter().collect();
    let caps = DeviceCaps {
        max_send_sge: 16,
        inline_len: 18,
        mtu: nic.mtu(),
        csum_offload: true,
    };
    let dp = Mlx5Datapath::new(nic.queues(), mem, caps, Mlx5Config::new(scfg)).expect("driver");
    (nic, dp)
}

fn value(i: usize) -> Vec<u8> {
    (0..200 + 300 * i).map(|b| (b * 7 + i) as u8).collect()
}

/// The server side of one step: whatever arrived is handled (ARP by the stack, requests by
/// the store), the answers put on the wire.
fn serve(nic: &EmuNic, dp: &mut Dp, kv: &mut Kv) {
    let mut rx: Vec<RxMsg> = Vec::new();
    while dp.recv_burst(&mut rx).unwrap() > 0 {}
    for m in &rx {
        kv.handle(dp, m).unwrap();
    }
    drop(rx);
    dp.flush().unwrap();
    nic.process();
    dp.poll_completions();
}

/// Sends requests `from..to` of `client`, moves them through both devices, and returns each
/// reply's (request id, payload).
fn round(
    client: &mut KvClient<Dp>,
    client_nic: &EmuNic,
    server: (&EmuNic, &mut Dp, &mut Kv),
    from: u64,
    to: u64,
) -> Vec<(u64, Vec<u8>)> {
    for seq in from..to {
        client.send_request(request_id(0, seq)).unwrap();
    }
    let mut got = Vec::new();
    let mut collect = |r: loadgen::Response<'_>| got.push((r.id.unwrap(), r.payload.to_vec()));
    client.poll_responses(&mut collect).unwrap(); // flushes the requests
    client_nic.process();
    serve(server.0, server.1, server.2);
    for _ in 0..4 {
        client.poll_responses(&mut collect).unwrap();
    }
    got
}

#[test]
fn a_kv_client_over_the_connectx_driver_resolves_and_every_reply_verifies() {
    for ser in ["cornflakes", "protobuf", "resp"] {
        let ser: Serialization = ser.parse().unwrap();
        let (server_nic, mut server_dp) =
            node(SERVER_MAC, SERVER, Some((*CLIENT.ip(), CLIENT_MAC)));
        // The client knows no MAC: it resolves the server through the wire.
        let (client_nic, mut client_dp) = node(CLIENT_MAC, CLIENT, None);
        EmuNic::link(&client_nic, &server_nic);
        let mut kv = Kv::new(server_dp.memory(), ServerConfig::new(ser));
        for i in 0..4 {
            kv.store_mut().put(&format!("k{i}"), &value(i)).unwrap();
        }
        let conn: ConnId = client_dp.connect(SERVER).unwrap();
        assert!(
            !client_dp.resolved(conn),
            "{ser}: resolved before any ARP answer"
        );
        for _ in 0..4 {
            client_dp.flush().unwrap();
            client_nic.process();
            serve(&server_nic, &mut server_dp, &mut kv);
            let mut rx = Vec::new();
            client_dp.recv_burst(&mut rx).unwrap();
        }
        assert!(
            client_dp.resolved(conn),
            "{ser}: the ARP answer was not taken in"
        );

        let ops: Vec<Op> = (0..5)
            .map(|i| Op::Get {
                key: format!("k{i}"),
            })
            .collect();
        let reqs = Arc::new(RunRequests {
            ops: ops.clone(),
            threads: 1,
        });
        let initial = |k: &str| -> Option<Vec<Vec<u8>>> {
            let i: usize = k.strip_prefix('k')?.parse().ok()?;
            (i < 4).then(|| vec![value(i)])
        };
        let checker = Checker {
            reqs: reqs.clone(),
            expected: Arc::new(Expected::new(Box::new(initial), &ops)),
            ser,
            cores: 1,
        };
        let mut dp = client_dp;
        // Two runs on one datapath, each with a fresh client (its own identity).
        for run in 0..2 {
            let mut client = KvClient::with_conns(dp, vec![conn], 1, 0, ser, reqs.clone()).unwrap();
            let got = round(
                &mut client,
                &client_nic,
                (&server_nic, &mut server_dp, &mut kv),
                0,
                10,
            );
            assert_eq!(got.len(), 10, "{ser} run {run}: replies");
            for (id, payload) in &got {
                assert!(
                    checker.check(*id, payload),
                    "{ser} run {run}: reply to {id} wrong"
                );
            }
            // The checker is not fooled by a reply to another request (k0's value for k1).
            let (id0, p0) = got.iter().find(|(id, _)| *id == request_id(0, 0)).unwrap();
            assert!(checker.check(*id0, p0));
            assert!(
                !checker.check(request_id(0, 1), p0),
                "{ser}: k0's reply taken for k1's"
            );
            dp = client.into_datapath();
        }
    }
}
