//! The opener on what every build has (kernel UDP and TCP on loopback), and the errors of the
//! datapaths this build lacks or never opens.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Connect, Transmit};
use cornflakes::{Datapath, Msg, RxMsg};
use datapath_open::{CargoRun, DatapathKind, DatapathSpec, OnDatapath, Open};

const RUN: CargoRun = CargoRun {
    package: "datapath-open",
    bin: None,
    args: "",
};

fn localhost(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
}

/// What the opened datapath is: its address, its largest message.
struct Describe;

impl OnDatapath for Describe {
    type Out = (SocketAddrV4, usize, &'static str);
    fn on<D: Datapath + 'static>(self, dp: D, spec: &DatapathSpec) -> Result<Self::Out, String> {
        Ok((dp.local_addr(), dp.max_message_len(), spec.name()))
    }
}

/// The opened datapath receives one 4 KiB message from a socket datapath at the jumbo MTU:
/// what arrived, and how many datagrams it dropped as longer than its MTU.
struct Receive4k;

impl OnDatapath for Receive4k {
    type Out = (Option<usize>, u64);
    fn on<D: Datapath + 'static>(self, mut dp: D, _: &DatapathSpec) -> Result<Self::Out, String> {
        let e = |e: std::io::Error| e.to_string();
        let mut cfg = datapath_socket::SocketConfig::new(localhost(0));
        cfg.mtu = datapath_socket::JUMBO_MTU;
        let mut sender = datapath_socket::SocketDatapath::new(cfg).map_err(|e| e.to_string())?;
        let conn = sender.connect(dp.local_addr()).map_err(e)?;
        sender
            .send_copy(conn, Msg::new(7, 1), &[5u8; 4096])
            .map_err(|e| e.to_string())?;
        sender.flush().map_err(|e| e.to_string())?;
        let mut got: Vec<RxMsg> = Vec::new();
        for _ in 0..2000 {
            dp.recv_burst(&mut got).map_err(e)?;
            if let Some(m) = got.first() {
                assert!(m.data.as_slice().iter().all(|&b| b == 5));
                return Ok((Some(m.data.len()), dp.counters().truncated));
            }
            if dp.counters().truncated > 0 {
                return Ok((None, dp.counters().truncated));
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Err("nothing arrived, and nothing was dropped".to_owned())
    }
}

#[test]
fn the_socket_datapath_opens_with_the_specs_mtu() {
    let mut spec = DatapathSpec::new(DatapathKind::Socket);
    let (addr, _, name) = spec
        .open(&Open::client(localhost(0), RUN), Describe)
        .unwrap();
    assert_eq!((addr.ip(), name), (&Ipv4Addr::LOCALHOST, "socket"));
    assert_ne!(addr.port(), 0);
    // Without an MTU in the spec, the socket's (here the jumbo one): 4 KiB arrives whole.
    let mut jumbo = Open::client(localhost(0), RUN);
    jumbo.socket.mtu = datapath_socket::JUMBO_MTU;
    let (got, dropped) = spec.open(&jumbo, Receive4k).unwrap();
    assert_eq!((got, dropped), (Some(4096), 0));
    // The spec's 1500 is the datapath's: the jumbo datagram is dropped and counted.
    spec.mtu = Some(1500);
    let (got, dropped) = spec.open(&jumbo, Receive4k).unwrap();
    assert_eq!((got, dropped), (None, 1));
    // An MTU no IPv4 host takes is refused before anything opens.
    spec.mtu = Some(10);
    let e = spec
        .open(&Open::client(localhost(0), RUN), Describe)
        .unwrap_err();
    assert_eq!(e, "IP MTU 10 is outside 576..=65535");
}

#[test]
fn kernel_tcp_opens_as_a_listening_server_or_a_client() {
    let spec = DatapathSpec::new(DatapathKind::Tcp);
    let (addr, _, name) = spec
        .open(&Open::server(localhost(0), RUN), Describe)
        .unwrap();
    assert_eq!(name, "tcp");
    assert_eq!(addr.ip(), &Ipv4Addr::LOCALHOST);
    spec.open(&Open::client(localhost(0), RUN), Describe)
        .unwrap();
}

#[test]
fn the_emulated_device_is_never_opened_by_name() {
    let e = DatapathSpec::new(DatapathKind::Emu)
        .open(&Open::server(localhost(0), RUN), Describe)
        .unwrap_err();
    assert!(e.contains("emulated ConnectX"), "{e}");
}

/// Without a NIC's feature, opening it says how to build it; with it, a device that does not
/// exist is an error naming it (no NIC needed for either).
#[test]
fn a_nic_opens_or_says_why_not() {
    for (kind, built) in [
        (DatapathKind::Xdp, cfg!(feature = "xdp")),
        (DatapathKind::Mlx5, cfg!(feature = "mlx5")),
    ] {
        let mut spec = DatapathSpec::new(kind);
        spec.device = "no-such-device-0".to_owned();
        let e = spec
            .open(&Open::server(localhost(7), RUN), Describe)
            .unwrap_err();
        if built {
            assert!(e.contains("no-such-device-0"), "{e}");
        } else {
            assert_eq!(e, datapath_open::needs_feature(kind, &RUN));
        }
    }
    if !cfg!(feature = "ice") {
        let e = DatapathSpec::new(DatapathKind::Ice)
            .open(&Open::server(localhost(7), RUN), Describe)
            .unwrap_err();
        assert_eq!(e, datapath_open::needs_feature(DatapathKind::Ice, &RUN));
    }
}
