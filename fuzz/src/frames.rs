//! Valid Ethernet/IPv4/UDP frames around fuzzer-chosen framing headers and payloads, so the
//! fuzzer's bytes reach the stack's framing and reassembly logic instead of dying in a
//! checksum check.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes_stack::checksum;
use cornflakes_stack::wire::{framing, MacAddr};

/// The stack under test.
pub const LOCAL_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
/// Its IPv4 address.
pub const LOCAL_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Its UDP port.
pub const LOCAL_PORT: u16 = 4791;

/// The stack's address.
pub fn local() -> SocketAddrV4 {
    SocketAddrV4::new(LOCAL_IP, LOCAL_PORT)
}

/// Peer `i` (a handful, so partial messages of several senders interleave).
pub fn peer(i: u8) -> (MacAddr, SocketAddrV4) {
    let i = i % 4;
    (
        MacAddr([0x02, 0, 0, 0, 1, i]),
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, i), 5000 + u16::from(i)),
    )
}

/// An Ethernet frame from `src` to the stack carrying `udp_payload`, with correct IPv4 and
/// UDP checksums (`udp_payload` is cut to fit a 16-bit IPv4 length).
pub fn udp_frame(src_mac: MacAddr, src: SocketAddrV4, udp_payload: &[u8]) -> Vec<u8> {
    let payload = &udp_payload[..udp_payload.len().min(65535 - 28)];
    let udp_len = (8 + payload.len()) as u16;
    let ip_len = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + ip_len as usize);
    f.extend_from_slice(&LOCAL_MAC.0);
    f.extend_from_slice(&src_mac.0);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_start = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src.ip().octets());
    f.extend_from_slice(&LOCAL_IP.octets());
    let ip_csum = checksum::finish(checksum::data(&f[ip_start..ip_start + 20]));
    f[ip_start + 10..ip_start + 12].copy_from_slice(&ip_csum.to_be_bytes());
    let udp_start = f.len();
    f.extend_from_slice(&src.port().to_be_bytes());
    f.extend_from_slice(&LOCAL_PORT.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let sum = checksum::combine(
        checksum::pseudo_header(src.ip().octets(), LOCAL_IP.octets(), udp_len),
        checksum::data(&f[udp_start..]),
    );
    let mut csum = checksum::finish(sum);
    if csum == 0 {
        csum = 0xffff;
    }
    f[udp_start + 6..udp_start + 8].copy_from_slice(&csum.to_be_bytes());
    f
}

/// A framing header (as the stack's sender writes it) followed by `body`.
pub fn framed(hdr: &framing::Repr, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; framing::HEADER_LEN + body.len()];
    hdr.emit(&mut p);
    p[framing::HEADER_LEN..].copy_from_slice(body);
    p
}

/// An IPv4 test stack: a few connections, small reassembly limits (so the fuzzer reaches them
/// quickly), short timeouts; `verify` picks software checksum verification or offload (the
/// device verified them, so arbitrary bytes get past the checksum checks).
pub fn stack(verify: bool) -> cornflakes_stack::EthStack {
    use cornflakes_stack::reassembly::ReassemblyConfig;
    use cornflakes_stack::{ChecksumCaps, StackConfig};
    let mut cfg = StackConfig::new(LOCAL_MAC, local());
    if !verify {
        cfg.caps = ChecksumCaps {
            ipv4_rx: false,
            udp_rx: false,
            ..ChecksumCaps::SOFTWARE
        };
    }
    cfg.max_conns = 3;
    cfg.max_message_len = REASM_MAX_MESSAGE;
    cfg.reassembly = ReassemblyConfig {
        timeout: std::time::Duration::from_millis(50),
        max_messages: REASM_MAX_MESSAGES,
        max_bytes: REASM_MAX_BYTES,
        max_message_len: REASM_MAX_MESSAGE,
    };
    cornflakes_stack::EthStack::new(cfg)
}

/// Reassembly limits of [`stack`].
pub const REASM_MAX_MESSAGES: usize = 4;
/// Bytes of partial messages [`stack`] may hold.
pub const REASM_MAX_BYTES: usize = 24 * 1024;
/// Largest message [`stack`] accepts.
pub const REASM_MAX_MESSAGE: usize = 16 * 1024;
