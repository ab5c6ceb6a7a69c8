//! The Ethernet/IPv4/UDP interface shared by every link-layer datapath (loopback, AF_XDP,
//! NIC drivers): connection table with header templates, ARP, the receive path with its drop
//! counters, and reassembly. It performs no I/O: the datapath hands it received frames and a
//! callback to transmit control frames (ARP), and drives it with [`EthStack::poll`].

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use cornflakes_datapath::{ConnId, DropCounters, RxMsg, SendError};
use cornflakes_mem::{PinnedMemory, RcBuf};

use crate::arp::{ArpCache, ArpConfig, ArpEvent, Resolution};
use crate::conntable::ConnTable;
use crate::reassembly::{Reassembler, ReassemblyConfig};
use crate::template::{HeaderTemplate, TEMPLATE_LEN};
use crate::wire::{arp, ethernet, framing, ipv4, udp, ChecksumCaps, Error, MacAddr};

/// Bytes before the message in every frame: Ethernet + IPv4 + UDP + framing headers.
pub const FRAME_OVERHEAD: usize = TEMPLATE_LEN + framing::HEADER_LEN;
/// Bytes of IPv4 + UDP + framing headers (what the IP MTU must also hold).
pub const IP_OVERHEAD: usize = ipv4::HEADER_LEN + udp::HEADER_LEN + framing::HEADER_LEN;

/// Configuration of an [`EthStack`].
#[derive(Clone, Debug)]
pub struct StackConfig {
    /// Our MAC address.
    pub mac: MacAddr,
    /// Our IPv4 address and UDP port.
    pub addr: SocketAddrV4,
    /// IP MTU (largest IPv4 packet), e.g. 1500; clamped to `IP_OVERHEAD + 1 ..= 65535`.
    pub mtu: usize,
    /// Which checksums software does.
    pub caps: ChecksumCaps,
    /// TTL of sent packets.
    pub ttl: u8,
    /// Most connections: when full, a new peer's message evicts an idle entry (unanswered
    /// ones first, [`crate::conntable`]); counted in `conn_evicted`.
    pub max_conns: usize,
    /// Largest message sent or accepted.
    pub max_message_len: usize,
    /// ARP timing.
    pub arp: ArpConfig,
    /// Reassembly limits (`max_message_len` is also applied).
    pub reassembly: ReassemblyConfig,
    /// Static ARP entries.
    pub static_arp: Vec<(Ipv4Addr, MacAddr)>,
}

impl StackConfig {
    /// Defaults for `mac` / `addr`: MTU 1500, software checksums, TTL 64, 4096 connections,
    /// 1 MiB messages.
    pub fn new(mac: MacAddr, addr: SocketAddrV4) -> StackConfig {
        StackConfig {
            mac,
            addr,
            mtu: 1500,
            caps: ChecksumCaps::SOFTWARE,
            ttl: 64,
            max_conns: 4096,
            max_message_len: 1 << 20,
            arp: ArpConfig::default(),
            reassembly: ReassemblyConfig::default(),
            static_arp: Vec::new(),
        }
    }
}

pub(crate) struct Conn {
    pub(crate) template: HeaderTemplate,
    pub(crate) resolved: bool,
}

/// The interface state of one queue.
pub struct EthStack {
    cfg: StackConfig,
    pub(crate) conns: ConnTable<Conn>,
    arp: ArpCache,
    reasm: Reassembler,
    counters: DropCounters,
    ident: u16,
}

impl EthStack {
    /// A stack with no connections.
    pub fn new(mut cfg: StackConfig) -> EthStack {
        // Lengths are 16-bit on the wire: keep frames inside one IPv4 packet.
        cfg.mtu = cfg.mtu.clamp(IP_OVERHEAD + 1, u16::MAX as usize);
        let mut arp = ArpCache::new(cfg.mac, *cfg.addr.ip(), cfg.arp);
        for (ip, mac) in &cfg.static_arp {
            arp.insert_static(*ip, *mac);
        }
        let mut rcfg = cfg.reassembly;
        rcfg.max_message_len = rcfg.max_message_len.min(cfg.max_message_len);
        EthStack {
            reasm: Reassembler::new(rcfg),
            conns: ConnTable::new(cfg.max_conns),
            cfg,
            arp,
            counters: DropCounters::default(),
            ident: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StackConfig {
        &self.cfg
    }

    /// Our address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.cfg.addr
    }

    /// Message bytes one frame carries.
    #[inline]
    pub fn frame_room(&self) -> usize {
        self.cfg.mtu.saturating_sub(IP_OVERHEAD).max(1)
    }

    /// The counters so far.
    pub fn counters(&self) -> DropCounters {
        let mut c = self.counters;
        c.conn_evicted = self.conns.evicted();
        c
    }

    /// The reassembler, so the fuzz targets can check its memory bound (fuzzing builds only).
    #[cfg(fuzzing)]
    pub fn reassembly(&self) -> &Reassembler {
        &self.reasm
    }

    /// Counts frames dropped for lack of receive buffers (the datapath noticed).
    pub fn count_no_rx_buffer(&mut self, n: u64) {
        self.counters.no_rx_buffers += n;
    }

    /// The connection to `peer`, created if new; starts ARP resolution when the peer's MAC
    /// address is unknown.
    pub fn connect(
        &mut self,
        peer: SocketAddrV4,
        now: Instant,
        tx: &mut dyn FnMut(&[u8]),
    ) -> Result<ConnId, SendError> {
        if let Some(c) = self.conns.lookup(peer) {
            self.conns.confirm(c);
            let resolved = self.conns.get(c).is_some_and(|c| c.resolved);
            if !resolved {
                self.try_resolve(c, now, tx);
            }
            return Ok(c);
        }
        let c = self.add_conn(peer, MacAddr::ZERO, false, true)?;
        self.try_resolve(c, now, tx);
        Ok(c)
    }

    fn try_resolve(&mut self, c: ConnId, now: Instant, tx: &mut dyn FnMut(&[u8])) {
        let Some(ip) = self.conns.peer(c).map(|p| *p.ip()) else {
            return;
        };
        if let Resolution::Resolved(mac) = self.arp.resolve(ip, now, tx) {
            if let Some(conn) = self.conns.get_mut(c) {
                conn.template.set_dst_mac(mac);
                conn.resolved = true;
            }
        }
    }

    fn add_conn(
        &mut self,
        peer: SocketAddrV4,
        mac: MacAddr,
        resolved: bool,
        confirmed: bool,
    ) -> Result<ConnId, SendError> {
        let conn = Conn {
            template: HeaderTemplate::new(
                self.cfg.mac,
                mac,
                self.cfg.addr,
                peer,
                self.cfg.ttl,
                self.cfg.caps,
            ),
            resolved,
        };
        self.conns.insert(peer, conn, confirmed).ok_or_else(|| {
            SendError::Io(std::io::Error::other(
                "connection table full: every entry is in use by the current burst",
            ))
        })
    }

    /// Whether `conn` exists and its peer's MAC address is known (sends can go out).
    pub fn resolved(&self, conn: ConnId) -> bool {
        self.conns.get(conn).is_some_and(|c| c.resolved)
    }

    /// The peer of `conn`.
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.conns.peer(conn)
    }

    /// The header template of a resolved connection, and the first of `frames` consecutive IP
    /// identifications reserved for the frames of one message.
    #[inline]
    pub fn template(
        &mut self,
        conn: ConnId,
        frames: usize,
    ) -> Result<(&HeaderTemplate, u16), SendError> {
        let ident = self.ident;
        // Sending to a peer confirms its connection: it is kept over unanswered ones.
        self.conns.confirm(conn);
        let c = self.conns.get(conn).ok_or(SendError::UnknownConn(conn))?;
        if !c.resolved {
            return Err(SendError::Resolving(conn));
        }
        self.ident = self.ident.wrapping_add(frames as u16);
        Ok((&c.template, ident))
    }

    /// Whether [`poll`](Self::poll) has anything to do: an ARP request awaiting its answer or
    /// a partly reassembled message. A datapath may skip reading the clock for `poll` when not.
    #[inline]
    pub fn has_timers(&self) -> bool {
        self.arp.has_pending() || self.reasm.pending() > 0
    }

    /// Housekeeping: ARP retries (failures counted) and reassembly timeouts.
    /// Called on every receive poll, so it costs a few instructions when nothing is pending.
    #[inline]
    pub fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) {
        if self.arp.has_pending() {
            let failed = self.arp.poll(now, tx);
            self.counters.arp_failures += failed.len() as u64;
        }
        self.counters.reassembly_timeout += self.reasm.expire(now) as u64;
    }

    /// Processes one received Ethernet frame: a complete message is appended to `out`, ARP is
    /// answered through `tx`, anything else is dropped and counted. Never panics.
    pub fn process_frame(
        &mut self,
        mem: &PinnedMemory,
        frame: RcBuf,
        now: Instant,
        out: &mut Vec<RxMsg>,
        tx: &mut dyn FnMut(&[u8]),
    ) {
        let eth = match ethernet::Frame::new_checked(&frame[..]) {
            Ok(f) => f,
            Err(_) => {
                self.counters.truncated += 1;
                return;
            }
        };
        let dst = eth.dst_addr();
        match eth.ethertype() {
            ethernet::EtherType::Ipv4 => {}
            ethernet::EtherType::Arp => {
                if dst != self.cfg.mac && !dst.is_broadcast() {
                    self.counters.wrong_dst += 1;
                    return;
                }
                let parsed =
                    arp::Packet::new_checked(eth.payload()).and_then(|p| arp::Repr::parse(&p));
                match parsed {
                    Ok(a) => {
                        if self.arp.process(&a, now, tx) == ArpEvent::Replied {
                            self.counters.arp_replies_sent += 1;
                        }
                        self.refresh_conns(a.sender_ip, now);
                    }
                    Err(Error::Truncated) => self.counters.truncated += 1,
                    Err(_) => self.counters.bad_arp += 1,
                }
                return;
            }
            ethernet::EtherType::Unknown(_) => {
                self.counters.non_ipv4 += 1;
                return;
            }
        }
        if dst != self.cfg.mac {
            self.counters.wrong_dst += 1;
            return;
        }
        let src_mac = eth.src_addr();
        let ip = match ipv4::Packet::new_checked(eth.payload()) {
            Ok(p) => p,
            Err(Error::Truncated) => {
                self.counters.truncated += 1;
                return;
            }
            Err(_) => {
                self.counters.bad_ip_header += 1;
                return;
            }
        };
        if ip.version() != 4 {
            self.counters.bad_ip_header += 1;
            return;
        }
        if ip.header_len() as usize > ipv4::HEADER_LEN {
            self.counters.ip_options += 1;
            return;
        }
        if self.cfg.caps.ipv4_rx && !ip.verify_checksum() {
            self.counters.bad_checksum += 1;
            return;
        }
        if ip.is_fragment() {
            self.counters.ip_fragment += 1;
            return;
        }
        if ip.dst_addr() != *self.cfg.addr.ip() {
            self.counters.wrong_dst += 1;
            return;
        }
        if ip.protocol() != ipv4::PROTO_UDP {
            self.counters.non_udp += 1;
            return;
        }
        let (src_ip, dst_ip) = (ip.src_addr(), ip.dst_addr());
        let u = match udp::Packet::new_checked(ip.payload()) {
            Ok(u) => u,
            Err(_) => {
                self.counters.truncated += 1;
                return;
            }
        };
        if self.cfg.caps.udp_rx && !u.verify_checksum(src_ip, dst_ip) {
            self.counters.bad_checksum += 1;
            return;
        }
        if u.dst_port() != self.cfg.addr.port() {
            self.counters.unknown_port += 1;
            return;
        }
        let peer = SocketAddrV4::new(src_ip, u.src_port());
        let payload = u.payload();
        let fp = framing::Packet::new_unchecked(payload);
        let hdr = match framing::Repr::parse(&fp) {
            Ok(h) => h,
            Err(_) => {
                self.counters.bad_framing += 1;
                return;
            }
        };
        let body = fp.payload();
        // Where the message bytes start inside the received buffer.
        let start = body.as_ptr() as usize - frame.as_ptr() as usize;
        // A whole message, before the sender gets a connection: a lone segment or junk
        // never takes a table entry.
        let (msg, data) = if hdr.seg_count == 1 {
            match frame.try_slice(start, body.len()) {
                Ok(Some(data)) => (hdr.msg(), data),
                _ => {
                    self.counters.truncated += 1;
                    return;
                }
            }
        } else {
            match self.reasm.push(mem, peer, &hdr, body, now) {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(d) => return d.count(&mut self.counters),
            }
        };
        let Some(conn) = self.conn_for_rx(peer, src_mac) else {
            self.counters.conn_table_full += 1;
            return;
        };
        self.counters.delivered += 1;
        out.push(RxMsg {
            conn,
            peer,
            msg,
            data,
        });
    }

    /// The connection of a sender, learned from the frame if new (its source MAC is the
    /// return address, so no ARP is needed to answer).
    fn conn_for_rx(&mut self, peer: SocketAddrV4, mac: MacAddr) -> Option<ConnId> {
        if let Some(c) = self.conns.lookup(peer) {
            if let Some(conn) = self.conns.get_mut(c) {
                if !conn.resolved && !mac.is_multicast() {
                    conn.template.set_dst_mac(mac);
                    conn.resolved = true;
                }
            }
            return Some(c);
        }
        if mac.is_multicast() {
            return None;
        }
        self.add_conn(peer, mac, true, false).ok()
    }

    /// After ARP learned `ip`, completes the connections waiting for it.
    fn refresh_conns(&mut self, ip: Ipv4Addr, now: Instant) {
        let Some(mac) = self.arp.lookup(ip, now) else {
            return;
        };
        for (_, conn) in self.conns.iter_mut().filter(|(p, _)| *p.ip() == ip) {
            conn.template.set_dst_mac(mac);
            conn.resolved = true;
        }
    }
}

impl std::fmt::Debug for EthStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EthStack")
            .field("addr", &self.cfg.addr)
            .field("mac", &self.cfg.mac)
            .field("conns", &self.conns.len())
            .field("reassembly", &self.reasm)
            .field("counters", &self.counters)
            .finish()
    }
}
