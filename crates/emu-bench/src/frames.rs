//! Request frames, built once before a run from the caller's payloads.

use std::net::SocketAddrV4;

use cornflakes::Msg;
use cornflakes_rpc::ClientIds;
use cornflakes_stack::iface::FRAME_OVERHEAD;
use cornflakes_stack::template::HeaderTemplate;
use cornflakes_stack::wire::{ethernet, framing, ipv4, udp, ChecksumCaps, MacAddr};
use datapath_mlx5::core_port;
use datapath_mlx5::emu::rx_offload_flags;

/// One request a client sends: its message type, payload (the serialized message) and the
/// server core it goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The framing header's message type.
    pub msg_type: u16,
    /// The message bytes.
    pub payload: Vec<u8>,
    /// The server core that must answer it (0 with one core): its frame goes to that core's
    /// UDP port ([`datapath_mlx5::core_port`] of the server's base port), which the device
    /// steers to that core's queue set. Echo spreads requests round-robin; a key-value store
    /// sends each to the core that owns its key.
    pub core: usize,
    /// Whether this request is a further part of the request before it in the list (a
    /// client's request split over several cores): it is sent at the same time as that one,
    /// and their latency is recorded once, when the last part's reply arrives. `false` for a
    /// request that stands alone or begins a group.
    pub with_previous: bool,
}

impl Request {
    /// A request for core 0 (a one-core run).
    pub fn new(msg_type: u16, payload: Vec<u8>) -> Request {
        Request {
            msg_type,
            payload,
            core: 0,
            with_previous: false,
        }
    }
}

/// Where the message id sits in a frame (little-endian u32 of the framing header).
pub(crate) const MSG_ID_AT: usize = FRAME_OVERHEAD - framing::HEADER_LEN + 4;
/// Where the UDP checksum sits.
const UDP_CSUM_AT: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::CHECKSUM_OFFSET;

/// Complete Ethernet/IPv4/UDP/framing frames with message id 0 and correct checksums, plus the
/// receive-CQE checksum flags a NIC would report for them. Every frame carries one incarnation,
/// drawn for the run ([`RequestFrames::incarnation`]): the emulated clients are one client
/// whose ids (the run's sequence numbers, at most 2^32) are never reused.
pub struct RequestFrames {
    incarnation: u64,
    frames: Vec<Vec<u8>>,
    types: Vec<u16>,
    flags: Vec<(u8, u8)>,
    cores: Vec<usize>,
    /// Per request: how many places back its group begins (0 for the first part).
    back: Vec<u32>,
    /// Per request that begins a group: the group's parts (1 for a request alone).
    group_len: Vec<u32>,
    groups: usize,
}

impl RequestFrames {
    /// Builds the frames from `client` (`client_mac`) to `server` (`server_mac`), request `r`
    /// to the UDP port of its core: `core_port(server.port(), r.core)`, with `cores` server
    /// cores. Every request must fit one frame of IP MTU `mtu`.
    pub fn build(
        requests: &[Request],
        client: (MacAddr, SocketAddrV4),
        server: (MacAddr, SocketAddrV4),
        mtu: usize,
        cores: usize,
    ) -> Result<RequestFrames, String> {
        if requests.is_empty() {
            return Err("no requests to send".to_owned());
        }
        let templates = (0..cores)
            .map(|c| {
                let to = SocketAddrV4::new(*server.1.ip(), core_port(server.1.port(), c)?);
                Ok(HeaderTemplate::new(
                    client.0,
                    server.0,
                    client.1,
                    to,
                    64,
                    ChecksumCaps::SOFTWARE,
                ))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let room = mtu.saturating_sub(FRAME_OVERHEAD - ethernet::HEADER_LEN);
        let mut out = RequestFrames {
            incarnation: ClientIds::fresh().incarnation(),
            frames: Vec::with_capacity(requests.len()),
            types: Vec::with_capacity(requests.len()),
            flags: Vec::with_capacity(requests.len()),
            cores: Vec::with_capacity(requests.len()),
            back: Vec::with_capacity(requests.len()),
            group_len: Vec::with_capacity(requests.len()),
            groups: 0,
        };
        for (i, r) in requests.iter().enumerate() {
            if r.with_previous {
                let Some(&b) = out.back.last() else {
                    return Err(
                        "request 0 is marked as a part of the request before it, but it is \
                         the first"
                            .to_owned(),
                    );
                };
                out.back.push(b + 1);
                out.group_len.push(0);
                let head = i - (b as usize + 1);
                out.group_len[head] += 1;
            } else {
                out.back.push(0);
                out.group_len.push(1);
                out.groups += 1;
            }
            let Some(t) = templates.get(r.core) else {
                return Err(format!(
                    "request {i} is for server core {}, but the run has {cores} (cores 0 to {})",
                    r.core,
                    cores.saturating_sub(1)
                ));
            };
            if r.payload.len() > room {
                return Err(format!(
                    "request {i} has {} bytes, but one frame of IP MTU {mtu} carries at most \
                     {room}: the emulated wire sends single-frame requests (raise the MTU)",
                    r.payload.len()
                ));
            }
            let mut f = vec![0u8; FRAME_OVERHEAD + r.payload.len()];
            t.write(&mut f, framing::HEADER_LEN + r.payload.len(), i as u16);
            let msg = Msg::new(0, r.msg_type).with_incarnation(out.incarnation);
            framing::Repr::single(msg, r.payload.len() as u32)
                .emit(&mut f[FRAME_OVERHEAD - framing::HEADER_LEN..]);
            f[FRAME_OVERHEAD..].copy_from_slice(&r.payload);
            let (src, dst) = (*client.1.ip(), *server.1.ip());
            let ip_bytes = &mut f[ethernet::HEADER_LEN..];
            ipv4::Packet::new_unchecked(&mut ip_bytes[..]).fill_checksum();
            udp::Packet::new_unchecked(&mut ip_bytes[ipv4::HEADER_LEN..]).fill_checksum(src, dst);
            out.flags.push(rx_offload_flags(&f));
            out.types.push(r.msg_type);
            out.cores.push(r.core);
            out.frames.push(f);
        }
        Ok(out)
    }

    /// The incarnation every request carries, and every reply must.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// Number of distinct requests.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether there are none (never, once built).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Frame `i` (message id 0).
    pub fn frame(&self, i: usize) -> &[u8] {
        &self.frames[i]
    }

    /// The message type of request `i`.
    pub fn msg_type(&self, i: usize) -> u16 {
        self.types[i]
    }

    /// The server core request `i` goes to.
    pub fn core(&self, i: usize) -> usize {
        self.cores[i]
    }

    /// How many places back the group of request `i` begins, and how many parts that group
    /// has: `(0, 1)` for a request that stands alone.
    pub fn group(&self, i: usize) -> (usize, usize) {
        let back = self.back[i] as usize;
        (back, self.group_len[i - back] as usize)
    }

    /// Number of groups (requests as a client sends them; parts of one count once).
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The send time of every wire request of a run whose groups are sent at `group_offsets`
    /// (ns): request `seq` is distinct request `seq mod len`, and every part of a group gets
    /// its group's time.
    pub fn expand_offsets(&self, group_offsets: &[u64]) -> Vec<u64> {
        let n = self.frames.len();
        let mut out = Vec::with_capacity(group_offsets.len() * n / self.groups.max(1) + n);
        let mut k = 0;
        for &at in group_offsets {
            let len = self.group_len[k] as usize;
            out.extend(std::iter::repeat_n(at, len));
            k = (k + len) % n;
        }
        out
    }

    /// The receive-CQE checksum flags of frame `i`.
    pub fn flags(&self, i: usize) -> (u8, u8) {
        self.flags[i]
    }

    /// Writes frame `i` into `out` (exactly its length) with message id `id`, updating the
    /// UDP checksum incrementally (RFC 1624), as a client would have sent it.
    #[inline]
    pub fn write(&self, i: usize, id: u32, out: &mut [u8]) {
        let frame = &self.frames[i];
        out.copy_from_slice(frame);
        let b = id.to_le_bytes();
        let w0 = u16::from_be_bytes([b[0], b[1]]);
        let w1 = u16::from_be_bytes([b[2], b[3]]);
        out[MSG_ID_AT..MSG_ID_AT + 4].copy_from_slice(&b);
        // The template's checksum, not the one just written: reading the destination back
        // would wait for the frame's stores.
        let old = u16::from_be_bytes([frame[UDP_CSUM_AT], frame[UDP_CSUM_AT + 1]]);
        let c = cornflakes_stack::checksum::update(old, 0, w0);
        let mut c = cornflakes_stack::checksum::update(c, 0, w1);
        if c == 0 {
            c = 0xffff;
        }
        out[UDP_CSUM_AT..UDP_CSUM_AT + 2].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn patched_frames_keep_valid_checksums_and_carry_the_id() {
        let reqs: Vec<Request> = (0..5)
            .map(|i| Request {
                msg_type: 7,
                payload: (0..(i * 37 + 1)).map(|b| b as u8).collect(),
                core: i % 2,
                with_previous: false,
            })
            .collect();
        let c = (
            MacAddr([2, 0, 0, 0, 0, 1]),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 5000),
        );
        let s = (
            MacAddr([2, 0, 0, 0, 0, 2]),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000),
        );
        let f = RequestFrames::build(&reqs, c, s, 1500, 2).unwrap();
        for (i, req) in reqs.iter().enumerate() {
            for id in [0u32, 1, 0xffff, 0x1234_5678, u32::MAX] {
                let mut out = vec![0u8; f.frame(i).len()];
                f.write(i, id, &mut out);
                assert_eq!(rx_offload_flags(&out), f.flags(i), "request {i} id {id}");
                let ip = ipv4::Packet::new_checked(&out[14..]).unwrap();
                let u = udp::Packet::new_checked(ip.payload()).unwrap();
                assert!(u.verify_checksum(ip.src_addr(), ip.dst_addr()));
                // Each request goes to its core's port.
                assert_eq!(u.dst_port(), 7000 + (i % 2) as u16);
                assert_eq!(f.core(i), i % 2);
                let fr = framing::Packet::new_checked(u.payload()).unwrap();
                assert_eq!(fr.msg_id(), id);
                assert_eq!(fr.msg_type(), 7);
                assert_eq!(fr.incarnation(), f.incarnation());
                assert_ne!(fr.incarnation(), 0);
                assert_eq!(&out[FRAME_OVERHEAD..], &req.payload[..]);
            }
        }
        let big = [Request::new(1, vec![0; 2000])];
        assert!(RequestFrames::build(&big, c, s, 1500, 1)
            .err()
            .unwrap()
            .contains("single-frame"));
        // Groups: parts marked `with_previous` join the request before them, and go out at
        // their group's time.
        let mut g = reqs.clone();
        g[2].with_previous = true;
        g[3].with_previous = true;
        let f = RequestFrames::build(&g, c, s, 1500, 2).unwrap();
        assert_eq!(f.groups(), 3);
        assert_eq!(
            (0..5).map(|i| f.group(i)).collect::<Vec<_>>(),
            vec![(0, 1), (0, 3), (1, 3), (2, 3), (0, 1)]
        );
        assert_eq!(
            f.expand_offsets(&[10, 20, 30, 40, 50]),
            vec![10, 20, 20, 20, 30, 40, 50, 50, 50]
        );
        g[0].with_previous = true;
        assert!(RequestFrames::build(&g, c, s, 1500, 2)
            .err()
            .unwrap()
            .contains("request 0 is marked as a part"));
        // A request for a core the run does not have is refused, naming both.
        let err = RequestFrames::build(&reqs, c, s, 1500, 1).err().unwrap();
        assert!(
            err.contains("request 1 is for server core 1, but the run has 1"),
            "{err}"
        );
    }
}
