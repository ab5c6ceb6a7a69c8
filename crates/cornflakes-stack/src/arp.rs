//! ARP: answering requests for our address and resolving peers.
//!
//! [`ArpCache`] is a state machine with no I/O and no clock of its own: the datapath's poll
//! passes the current [`Instant`] and a callback that transmits a frame. Resolution sends a
//! request at once, retries every `retry_interval` up to `max_retries` times, then marks the
//! address failed (a later [`ArpCache::resolve`] starts over). Static entries never expire.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::wire::arp::{self, Operation};
use crate::wire::{ethernet, MacAddr};

/// Bytes of an Ethernet frame carrying an ARP packet (before padding).
pub const ARP_FRAME_LEN: usize = ethernet::HEADER_LEN + arp::PACKET_LEN;

/// ARP timing and size limits.
#[derive(Clone, Copy, Debug)]
pub struct ArpConfig {
    /// Time between requests for an unresolved address.
    pub retry_interval: Duration,
    /// Requests sent before giving up (the first included).
    pub max_retries: u32,
    /// How long a learned entry stays valid.
    pub entry_lifetime: Duration,
    /// Most dynamic entries kept; further learning is ignored.
    pub max_entries: usize,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            retry_interval: Duration::from_millis(100),
            max_retries: 5,
            entry_lifetime: Duration::from_secs(300),
            max_entries: 4096,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Static(MacAddr),
    Resolved { mac: MacAddr, expires: Instant },
    Pending { sent: u32, next: Instant },
    Failed,
}

/// The answer of [`ArpCache::resolve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The address is known.
    Resolved(MacAddr),
    /// A request is outstanding.
    Pending,
    /// Resolution gave up (no reply after all retries).
    Failed,
}

/// What processing an ARP packet did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpEvent {
    /// A request for our address was answered (the sender was also learned).
    Replied,
    /// An address was learned or refreshed.
    Learned(Ipv4Addr, MacAddr),
    /// Nothing to do (not for us, not interesting).
    Ignored,
}

/// Our ARP state.
#[derive(Debug)]
pub struct ArpCache {
    mac: MacAddr,
    ip: Ipv4Addr,
    cfg: ArpConfig,
    entries: HashMap<Ipv4Addr, Entry>,
    dynamic: usize,
    /// Entries in `Pending` state: `poll`, called on every receive poll, has nothing to do
    /// when there are none.
    pending: usize,
}

impl ArpCache {
    /// An empty cache for the interface `mac` / `ip`.
    pub fn new(mac: MacAddr, ip: Ipv4Addr, cfg: ArpConfig) -> ArpCache {
        ArpCache {
            mac,
            ip,
            cfg,
            entries: HashMap::new(),
            dynamic: 0,
            pending: 0,
        }
    }

    /// Sets the entry of `ip`, keeping the count of pending entries; returns the old entry.
    fn set(&mut self, ip: Ipv4Addr, e: Entry) -> Option<Entry> {
        let old = self.entries.insert(ip, e);
        if matches!(old, Some(Entry::Pending { .. })) {
            self.pending -= 1;
        }
        if matches!(e, Entry::Pending { .. }) {
            self.pending += 1;
        }
        old
    }

    /// Adds a static entry (never expires, never re-resolved).
    pub fn insert_static(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        if let Some(old) = self.set(ip, Entry::Static(mac)) {
            if !matches!(old, Entry::Static(_)) {
                self.dynamic -= 1;
            }
        }
    }

    /// The MAC address of `ip` if known and not expired.
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<MacAddr> {
        match self.entries.get(&ip)? {
            Entry::Static(m) => Some(*m),
            Entry::Resolved { mac, expires } if *expires > now => Some(*mac),
            _ => None,
        }
    }

    /// Resolves `ip`: the known address, or a request sent now through `tx` (unless one is
    /// already outstanding).
    pub fn resolve(&mut self, ip: Ipv4Addr, now: Instant, tx: &mut dyn FnMut(&[u8])) -> Resolution {
        if let Some(m) = self.lookup(ip, now) {
            return Resolution::Resolved(m);
        }
        match self.entries.get(&ip) {
            Some(Entry::Pending { .. }) => Resolution::Pending,
            _ => {
                if !self.entries.contains_key(&ip) {
                    if self.dynamic >= self.cfg.max_entries {
                        return Resolution::Failed;
                    }
                    self.dynamic += 1;
                }
                self.send(
                    Operation::Request,
                    MacAddr::BROADCAST,
                    MacAddr::ZERO,
                    ip,
                    tx,
                );
                self.set(
                    ip,
                    Entry::Pending {
                        sent: 1,
                        next: now + self.cfg.retry_interval,
                    },
                );
                Resolution::Pending
            }
        }
    }

    /// The state of `ip` without sending anything.
    pub fn state(&self, ip: Ipv4Addr, now: Instant) -> Option<Resolution> {
        if let Some(m) = self.lookup(ip, now) {
            return Some(Resolution::Resolved(m));
        }
        match self.entries.get(&ip)? {
            Entry::Pending { .. } => Some(Resolution::Pending),
            Entry::Failed | Entry::Resolved { .. } => Some(Resolution::Failed),
            Entry::Static(_) => None,
        }
    }

    /// Retries outstanding requests that are due; returns the addresses that failed now.
    #[inline]
    pub fn poll(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) -> Vec<Ipv4Addr> {
        if !self.has_pending() {
            return Vec::new();
        }
        self.retry_pending(now, tx)
    }

    /// Whether a request is outstanding (what [`poll`](Self::poll) would look at).
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending > 0
    }

    fn retry_pending(&mut self, now: Instant, tx: &mut dyn FnMut(&[u8])) -> Vec<Ipv4Addr> {
        let mut due = Vec::new();
        let mut failed = Vec::new();
        for (ip, e) in self.entries.iter_mut() {
            if let Entry::Pending { sent, next } = e {
                if *next <= now {
                    if *sent >= self.cfg.max_retries {
                        *e = Entry::Failed;
                        self.pending -= 1;
                        failed.push(*ip);
                    } else {
                        *sent += 1;
                        *next = now + self.cfg.retry_interval;
                        due.push(*ip);
                    }
                }
            }
        }
        for ip in due {
            self.send(
                Operation::Request,
                MacAddr::BROADCAST,
                MacAddr::ZERO,
                ip,
                tx,
            );
        }
        failed
    }

    /// Processes a received ARP packet (already validated): answers requests for our address
    /// and learns senders we asked about or that asked us.
    pub fn process(
        &mut self,
        pkt: &arp::Repr,
        now: Instant,
        tx: &mut dyn FnMut(&[u8]),
    ) -> ArpEvent {
        let for_us = pkt.target_ip == self.ip;
        let known = self.entries.contains_key(&pkt.sender_ip);
        let mut event = ArpEvent::Ignored;
        if (known || for_us) && pkt.sender_ip != self.ip && !pkt.sender_mac.is_multicast() {
            match self.entries.get(&pkt.sender_ip) {
                Some(Entry::Static(_)) => {}
                Some(_) => {
                    self.learn(pkt.sender_ip, pkt.sender_mac, now);
                    event = ArpEvent::Learned(pkt.sender_ip, pkt.sender_mac);
                }
                None if self.dynamic < self.cfg.max_entries => {
                    self.dynamic += 1;
                    self.learn(pkt.sender_ip, pkt.sender_mac, now);
                    event = ArpEvent::Learned(pkt.sender_ip, pkt.sender_mac);
                }
                None => {}
            }
        }
        if for_us && pkt.operation == Operation::Request {
            self.send(
                Operation::Reply,
                pkt.sender_mac,
                pkt.sender_mac,
                pkt.sender_ip,
                tx,
            );
            event = ArpEvent::Replied;
        }
        event
    }

    fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr, now: Instant) {
        self.set(
            ip,
            Entry::Resolved {
                mac,
                expires: now + self.cfg.entry_lifetime,
            },
        );
    }

    fn send(
        &self,
        op: Operation,
        eth_dst: MacAddr,
        target_mac: MacAddr,
        target_ip: Ipv4Addr,
        tx: &mut dyn FnMut(&[u8]),
    ) {
        let mut frame = [0u8; ARP_FRAME_LEN];
        ethernet::Repr {
            src: self.mac,
            dst: eth_dst,
            ethertype: ethernet::EtherType::Arp,
        }
        .emit(&mut ethernet::Frame::new_unchecked(&mut frame[..]));
        arp::Repr {
            operation: op,
            sender_mac: self.mac,
            sender_ip: self.ip,
            target_mac,
            target_ip,
        }
        .emit(&mut arp::Packet::new_unchecked(
            &mut frame[ethernet::HEADER_LEN..],
        ));
        tx(&frame);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const US_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const PEER_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn parse(frame: &[u8]) -> (ethernet::Repr, arp::Repr) {
        let f = ethernet::Frame::new_checked(frame).unwrap();
        let e = ethernet::Repr::parse(&f).unwrap();
        let a = arp::Repr::parse(&arp::Packet::new_checked(f.payload()).unwrap()).unwrap();
        (e, a)
    }

    fn cache() -> ArpCache {
        ArpCache::new(
            US_MAC,
            US,
            ArpConfig {
                retry_interval: Duration::from_millis(10),
                max_retries: 3,
                entry_lifetime: Duration::from_secs(1),
                max_entries: 2,
            },
        )
    }

    #[test]
    fn answers_requests_for_us_only() {
        let mut c = cache();
        let t0 = Instant::now();
        let mut sent = Vec::new();
        let req = arp::Repr {
            operation: Operation::Request,
            sender_mac: PEER_MAC,
            sender_ip: PEER,
            target_mac: MacAddr::ZERO,
            target_ip: US,
        };
        assert_eq!(
            c.process(&req, t0, &mut |f| sent.push(f.to_vec())),
            ArpEvent::Replied
        );
        assert_eq!(sent.len(), 1);
        let (e, a) = parse(&sent[0]);
        assert_eq!(e.dst, PEER_MAC);
        assert_eq!(a.operation, Operation::Reply);
        assert_eq!((a.sender_mac, a.sender_ip), (US_MAC, US));
        assert_eq!((a.target_mac, a.target_ip), (PEER_MAC, PEER));
        // The asker was learned on the way.
        assert_eq!(c.lookup(PEER, t0), Some(PEER_MAC));
        let other = arp::Repr {
            target_ip: Ipv4Addr::new(10, 0, 0, 9),
            sender_ip: Ipv4Addr::new(10, 0, 0, 8),
            ..req
        };
        assert_eq!(
            c.process(&other, t0, &mut |f| sent.push(f.to_vec())),
            ArpEvent::Ignored
        );
        assert_eq!(sent.len(), 1);
        assert_eq!(c.lookup(Ipv4Addr::new(10, 0, 0, 8), t0), None);
    }

    #[test]
    fn resolves_with_retries_then_reply() {
        let mut c = cache();
        let t0 = Instant::now();
        let mut sent = 0;
        assert_eq!(c.resolve(PEER, t0, &mut |_| sent += 1), Resolution::Pending);
        assert_eq!(sent, 1);
        // Asking again does not resend.
        assert_eq!(c.resolve(PEER, t0, &mut |_| sent += 1), Resolution::Pending);
        assert_eq!(sent, 1);
        // Not yet due.
        assert!(c
            .poll(t0 + Duration::from_millis(5), &mut |_| sent += 1)
            .is_empty());
        assert_eq!(sent, 1);
        // Due: second request.
        c.poll(t0 + Duration::from_millis(10), &mut |_| sent += 1);
        assert_eq!(sent, 2);
        let reply = arp::Repr {
            operation: Operation::Reply,
            sender_mac: PEER_MAC,
            sender_ip: PEER,
            target_mac: US_MAC,
            target_ip: US,
        };
        let t1 = t0 + Duration::from_millis(15);
        assert_eq!(
            c.process(&reply, t1, &mut |_| sent += 1),
            ArpEvent::Learned(PEER, PEER_MAC)
        );
        assert_eq!(
            c.resolve(PEER, t1, &mut |_| sent += 1),
            Resolution::Resolved(PEER_MAC)
        );
        assert_eq!(sent, 2);
        // Entries expire after their lifetime and are resolved again.
        let t2 = t1 + Duration::from_secs(2);
        assert_eq!(c.lookup(PEER, t2), None);
        assert_eq!(c.resolve(PEER, t2, &mut |_| sent += 1), Resolution::Pending);
        assert_eq!(sent, 3);
    }

    #[test]
    fn gives_up_after_max_retries() {
        let mut c = cache();
        let t0 = Instant::now();
        let mut sent = 0;
        c.resolve(PEER, t0, &mut |_| sent += 1);
        let mut t = t0;
        let mut failed = Vec::new();
        for _ in 0..5 {
            t += Duration::from_millis(10);
            failed.extend(c.poll(t, &mut |_| sent += 1));
        }
        assert_eq!(sent, 3);
        assert_eq!(failed, vec![PEER]);
        assert_eq!(c.state(PEER, t), Some(Resolution::Failed));
        // A new resolve starts over, and is retried again.
        assert_eq!(c.resolve(PEER, t, &mut |_| sent += 1), Resolution::Pending);
        assert_eq!(sent, 4);
        c.poll(t + Duration::from_millis(10), &mut |_| sent += 1);
        assert_eq!(sent, 5);
    }

    #[test]
    fn retries_only_what_is_still_pending() {
        // Poll skips its walk when nothing is pending; every way out of `Pending` (a reply,
        // a static entry, giving up) must leave the others retried.
        let mut c = cache();
        let t0 = Instant::now();
        let other = Ipv4Addr::new(10, 0, 0, 3);
        let asked = std::cell::RefCell::new(Vec::new());
        let mut ask = |f: &[u8]| asked.borrow_mut().push(parse(f).1.target_ip);
        c.resolve(PEER, t0, &mut ask);
        c.resolve(other, t0, &mut ask);
        let reply = arp::Repr {
            operation: Operation::Reply,
            sender_mac: PEER_MAC,
            sender_ip: PEER,
            target_mac: US_MAC,
            target_ip: US,
        };
        c.process(&reply, t0, &mut ask);
        let t1 = t0 + Duration::from_millis(10);
        c.poll(t1, &mut ask);
        assert_eq!(*asked.borrow(), vec![PEER, other, other]);
        c.insert_static(other, PEER_MAC);
        c.poll(t1 + Duration::from_millis(10), &mut ask);
        assert_eq!(asked.borrow().len(), 3, "a static entry is not retried");
        let third = Ipv4Addr::new(10, 0, 0, 4);
        let t2 = t1 + Duration::from_millis(20);
        c.resolve(third, t2, &mut ask);
        let mut failed = Vec::new();
        for i in 1..=4 {
            failed.extend(c.poll(t2 + Duration::from_millis(10 * i), &mut ask));
        }
        assert_eq!(failed, vec![third]);
        assert_eq!(
            *asked.borrow(),
            vec![PEER, other, other, third, third, third]
        );
        assert!(c.poll(t2 + Duration::from_secs(1), &mut ask).is_empty());
    }

    #[test]
    fn static_entries_and_limits() {
        let mut c = cache();
        let t0 = Instant::now();
        c.insert_static(PEER, PEER_MAC);
        assert_eq!(
            c.resolve(PEER, t0, &mut |_| panic!("no request")),
            Resolution::Resolved(PEER_MAC)
        );
        // A forged reply does not override a static entry.
        let forged = arp::Repr {
            operation: Operation::Reply,
            sender_mac: MacAddr([6; 6]),
            sender_ip: PEER,
            target_mac: US_MAC,
            target_ip: US,
        };
        c.process(&forged, t0, &mut |_| {});
        assert_eq!(
            c.lookup(PEER, t0 + Duration::from_secs(1000)),
            Some(PEER_MAC)
        );
        // At most two dynamic entries.
        let mut n = 0;
        for i in 10..14 {
            if c.resolve(Ipv4Addr::new(10, 0, 0, i), t0, &mut |_| {}) == Resolution::Pending {
                n += 1;
            }
        }
        assert_eq!(n, 2);
    }
}
