//! [`XdpDatapath`]: the Cornflakes [`Datapath`](cornflakes::Datapath) over one AF_XDP socket.
//!
//! Ethernet/IPv4/UDP, ARP, framing, segmentation and reassembly come from `cornflakes-stack`
//! ([`EthStack`], [`HeaderTemplate`], [`FramePlan`]/[`Cursor`]); this module turns its frames
//! into descriptor chains (see [`crate::plan`]) and drives the socket ([`Xsk`]).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;
use std::time::Instant;

use cornflakes::datapath::{
    Completions, Connect, DatapathMemory, DropCounters, Receive, RxMsg, Transmit,
};
use cornflakes::wire::Demote;
use cornflakes::{ConnId, CornflakesObj, Msg, PinnedMemory, RcBuf, RcBufMut, SendError};
use cornflakes_stack::checksum::Accumulator;
use cornflakes_stack::iface::{EthStack, StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::segment::{Cursor, FramePlan};
use cornflakes_stack::template::{HeaderTemplate, TEMPLATE_LEN};
use cornflakes_stack::wire::{framing, ChecksumCaps, MacAddr};

use crate::bpf::{AttachMode, Program, ProgramStats, XdpProgram};
use crate::plan::{fresh_buffer_frames, plan_chain, Entry, FRAME_SIZE};
use crate::sys::{self, BindMode, RingSizes};
use crate::xsk::{umem_memory, TxError, Xsk, XskConfig, XskStats, MAX_TX_DESCRIPTORS};

/// Frames taken from the RX ring per [`Receive::recv_burst`].
pub const RX_BURST: usize = 64;
/// Smallest Ethernet frame (without FCS); shorter control frames are zero-padded.
const MIN_FRAME: usize = 60;
/// Attempts to find room in the TX ring (flushing and reclaiming between attempts).
const TX_RETRIES: usize = 64;

/// How to set up an [`XdpDatapath`].
#[derive(Clone, Debug)]
pub struct XdpConfig {
    /// Interface name (looked up in the calling thread's network namespace).
    pub ifname: String,
    /// Queue to bind (and whose traffic the XDP program redirects).
    pub queue: u32,
    /// Our IPv4 address and UDP port. The stack owns the address: with `arp_to_stack` it
    /// answers ARP for it.
    pub addr: SocketAddrV4,
    /// IP MTU; `None` uses the interface's.
    pub mtu: Option<usize>,
    /// Bytes of pinned memory = the UMEM (rounded up to 2 MiB). Application values meant to
    /// be sent zero-copy must be allocated from [`DatapathMemory::memory`].
    pub umem_bytes: usize,
    /// Copy (any device, e.g. veth) or zero-copy (drivers with AF_XDP zero-copy support).
    pub mode: BindMode,
    /// Native (driver) or generic XDP.
    pub attach: AttachMode,
    /// Redirect ARP to our stack (which then answers for `addr`) instead of the kernel.
    pub arp_to_stack: bool,
    /// Software checksums. The default sends UDP checksum 0 ("none", valid for IPv4) so the
    /// CPU never reads zero-copy payloads; [`ChecksumCaps::SOFTWARE`] computes it.
    pub caps: ChecksumCaps,
    /// Ring sizes.
    pub rings: RingSizes,
    /// Frames kept on the fill ring.
    pub rx_frames: usize,
    /// Descriptors per frame (at most [`MAX_TX_DESCRIPTORS`]).
    pub max_segments: usize,
    /// Largest message sent or accepted.
    pub max_message_len: usize,
    /// Static ARP entries.
    pub static_arp: Vec<(Ipv4Addr, MacAddr)>,
}

impl XdpConfig {
    /// Defaults: queue 0, interface MTU, 32 MiB UMEM, copy mode, native XDP, ARP answered by
    /// the stack, UDP checksum 0, 2048-entry rings, 18 descriptors per frame, 1 MiB messages.
    pub fn new(ifname: &str, addr: SocketAddrV4) -> XdpConfig {
        XdpConfig {
            ifname: ifname.to_string(),
            queue: 0,
            addr,
            mtu: None,
            umem_bytes: 32 << 20,
            mode: BindMode::Copy,
            attach: AttachMode::Native,
            arp_to_stack: true,
            caps: ChecksumCaps::NO_UDP_TX,
            rings: RingSizes {
                fill: 2048,
                completion: 2048,
                rx: 2048,
                tx: 2048,
            },
            rx_frames: 1024,
            max_segments: MAX_TX_DESCRIPTORS,
            max_message_len: 1 << 20,
            static_arp: Vec::new(),
        }
    }
}

/// The AF_XDP datapath. Create it on the thread (and in the network namespace) that will use
/// it; like the pinned memory, it stays on that thread.
pub struct XdpDatapath {
    // Field order is drop order: the socket (and its hold on the frames) first, then the
    // program (detached from the interface), then the rest.
    xsk: Xsk,
    prog: XdpProgram,
    stack: EthStack,
    mem: PinnedMemory,
    caps: ChecksumCaps,
    max_segments: usize,
    rx: Vec<RcBuf>,
    ctrl: Vec<Vec<u8>>,
    zc: Vec<RcBuf>,
    entries: Vec<Entry>,
    head: Vec<u8>,
    pieces: Vec<RcBuf>,
    seen_rx_drops: u64,
}

impl XdpDatapath {
    /// Attaches the XDP program to the interface, creates the UMEM and socket and starts
    /// redirecting `cfg.addr`'s port (and ARP, if configured) to it. Needs root (CAP_NET_ADMIN,
    /// CAP_BPF, CAP_NET_RAW).
    pub fn new(cfg: XdpConfig) -> io::Result<XdpDatapath> {
        let ifindex = sys::ifindex(&cfg.ifname)?;
        let mac = MacAddr(sys::mac_address(&cfg.ifname)?);
        let mtu = match cfg.mtu {
            Some(m) => m,
            None => sys::mtu(&cfg.ifname)?,
        };
        let max_segments = cfg.max_segments.clamp(1, MAX_TX_DESCRIPTORS);
        let prog = XdpProgram::attach(ifindex, Program::Redirect, cfg.attach)?;
        prog.set_arp_to_stack(cfg.arp_to_stack)?;
        let mem = umem_memory(cfg.umem_bytes).map_err(io::Error::other)?;
        let xcfg = XskConfig {
            ifindex,
            queue: cfg.queue,
            mode: cfg.mode,
            rings: cfg.rings,
            rx_frames: cfg.rx_frames,
            max_rx_frame: mem.max_item_size(),
        };
        let xsk = Xsk::new(mem.clone(), &xcfg)?;
        prog.register_socket(cfg.queue, xsk.fd())?;
        prog.set_port(cfg.addr.port())?;
        let mut scfg = StackConfig::new(mac, cfg.addr);
        scfg.mtu = mtu;
        scfg.caps = cfg.caps;
        scfg.max_message_len = cfg.max_message_len;
        scfg.static_arp = cfg.static_arp.clone();
        Ok(XdpDatapath {
            xsk,
            prog,
            stack: EthStack::new(scfg),
            mem,
            caps: cfg.caps,
            max_segments,
            rx: Vec::with_capacity(RX_BURST),
            ctrl: Vec::new(),
            zc: Vec::new(),
            entries: Vec::new(),
            head: Vec::new(),
            pieces: Vec::with_capacity(MAX_TX_DESCRIPTORS),
            seen_rx_drops: 0,
        })
    }

    /// Our MAC address.
    pub fn mac(&self) -> MacAddr {
        self.stack.config().mac
    }

    /// Whether the socket runs zero-copy (false on veth and other copy-mode devices).
    pub fn is_zero_copy(&self) -> bool {
        self.xsk.is_zero_copy()
    }

    /// Socket-layer counters (multi-buffer receives, descriptors sent, ...).
    pub fn xsk_stats(&self) -> XskStats {
        self.xsk.stats()
    }

    /// The XDP program's counters.
    pub fn program_stats(&self) -> io::Result<ProgramStats> {
        self.prog.stats()
    }

    /// The kernel's counters for the socket.
    pub fn kernel_stats(&self) -> io::Result<libc::xdp_statistics> {
        self.xsk.kernel_stats()
    }

    /// Sends the control frames (ARP) the stack produced.
    fn send_ctrl(&mut self) {
        if self.ctrl.is_empty() {
            return;
        }
        let frames = std::mem::take(&mut self.ctrl);
        for f in &frames {
            let len = f.len().max(MIN_FRAME);
            let Ok(mut b) = self.mem.alloc(len) else {
                continue; // ARP retries; nothing else to do without a buffer
            };
            b[..f.len()].copy_from_slice(f);
            b[f.len()..].fill(0);
            let mut one = vec![b.freeze()];
            // A full ring drops the control frame; ARP retries cover that.
            let _ = self.xsk.send(&mut one);
        }
        self.ctrl = frames;
        self.ctrl.clear();
        let _ = self.xsk.flush();
    }

    /// Queues one frame: `hdr` holds its Ethernet/IPv4/UDP and framing headers and any head
    /// bytes; `parts` follow it. Fills in the UDP checksum when software computes it, copies
    /// parts that are not in the UMEM, and if the chain is longer than `max_segments` copies
    /// the trailing parts into one bounce buffer.
    fn queue_frame(
        &mut self,
        template: &HeaderTemplate,
        mut hdr: RcBufMut,
        parts: &mut Vec<RcBuf>,
        udp_payload_len: usize,
    ) -> Result<(), SendError> {
        if self.caps.udp_tx {
            let mut acc = Accumulator::new();
            acc.add(&hdr[TEMPLATE_LEN..]);
            for p in parts.iter() {
                acc.add(p);
            }
            HeaderTemplate::set_udp_checksum(
                &mut hdr,
                template.udp_checksum(udp_payload_len, acc.sum()),
            );
        }
        let hdr_frames = fresh_buffer_frames(hdr.len(), FRAME_SIZE);
        for p in parts.iter_mut() {
            if self.xsk.umem_offset(p).is_none() {
                *p = self.mem.alloc_copy(p)?;
            }
        }
        let mut costs = Vec::with_capacity(parts.len());
        for p in parts.iter() {
            costs.push(
                self.xsk
                    .descriptors_for(std::slice::from_ref(p))
                    .unwrap_or(1),
            );
        }
        let total: usize = hdr_frames + costs.iter().sum::<usize>();
        if total > self.max_segments {
            // Keep the longest prefix of parts that leaves room for a bounce buffer holding
            // the rest.
            let mut keep = parts.len();
            loop {
                let rest: usize = parts[keep..].iter().map(|p| p.len()).sum();
                let used: usize = hdr_frames + costs[..keep].iter().sum::<usize>();
                if used + fresh_buffer_frames(rest, FRAME_SIZE) <= self.max_segments {
                    break;
                }
                if keep == 0 {
                    return Err(SendError::TooManySegments {
                        entries: total,
                        max: self.max_segments,
                    });
                }
                keep -= 1;
            }
            let rest: usize = parts[keep..].iter().map(|p| p.len()).sum();
            let mut bounce = self.mem.alloc(rest)?;
            let mut at = 0;
            for p in parts.drain(keep..) {
                bounce[at..at + p.len()].copy_from_slice(&p);
                at += p.len();
            }
            parts.push(bounce.freeze());
        }
        self.pieces.clear();
        self.pieces.push(hdr.freeze());
        self.pieces.append(parts);
        let mut pieces = std::mem::take(&mut self.pieces);
        let r = self.push_with_retry(&mut pieces);
        pieces.clear();
        self.pieces = pieces;
        r
    }

    fn push_with_retry(&mut self, pieces: &mut Vec<RcBuf>) -> Result<(), SendError> {
        for attempt in 0..TX_RETRIES {
            match self.xsk.send(pieces) {
                Ok(()) => return Ok(()),
                Err(TxError::RingFull) => {
                    self.xsk.flush()?;
                    self.xsk.poll_completions();
                    if attempt > 8 {
                        std::thread::yield_now();
                    }
                }
                Err(TxError::TooManyDescriptors { needed, max }) => {
                    return Err(SendError::TooManySegments {
                        entries: needed,
                        max,
                    })
                }
                Err(TxError::NotInUmem) => {
                    return Err(SendError::Io(io::Error::other(
                        "internal: a transmit piece outside the UMEM",
                    )))
                }
            }
        }
        Err(SendError::Full)
    }

    /// Sends a message made of `head` bytes (copied into the frames' header buffers) followed
    /// by the `zc` buffers (sent by reference), cut into as many frames as needed.
    fn send_stream(
        &mut self,
        conn: ConnId,
        msg: Msg,
        head: &[u8],
        zc: &[RcBuf],
    ) -> Result<(), SendError> {
        let total = head.len() + zc.iter().map(|b| b.len()).sum::<usize>();
        let max = self.stack.config().max_message_len;
        if total > max {
            return Err(SendError::TooLarge { len: total, max });
        }
        let plan =
            FramePlan::new(total, self.stack.frame_room()).map_err(|e| SendError::TooLarge {
                len: e.len,
                max: e.max,
            })?;
        // Which bytes of the head and of each buffer land in each frame.
        let mut heads: Vec<Range<usize>> = vec![0..0; plan.frames];
        let mut parts: Vec<Vec<RcBuf>> = (0..plan.frames).map(|_| Vec::new()).collect();
        let mut cursor = Cursor::new(plan);
        cursor.feed(head.len(), |p| heads[p.frame] = p.offset..p.offset + p.len);
        let mut overflow = false;
        for b in zc {
            cursor.feed(b.len(), |p| match b.try_slice(p.offset, p.len) {
                Ok(Some(s)) => parts[p.frame].push(s),
                _ => overflow = true,
            });
        }
        if overflow {
            return Err(SendError::Io(io::Error::other(
                "buffer reference count saturated",
            )));
        }
        let (template, first_ident) = self.stack.template(conn, plan.frames)?;
        let template = template.clone();
        for (i, frame_parts) in parts.iter_mut().enumerate() {
            let body = plan.frame_len(i);
            let h = &head[heads[i].clone()];
            let mut hdr = self.mem.alloc(FRAME_OVERHEAD + h.len())?;
            let ident = first_ident.wrapping_add(i as u16);
            template.write(&mut hdr, framing::HEADER_LEN + body, ident);
            plan.header(i, msg).emit(&mut hdr[TEMPLATE_LEN..]);
            hdr[FRAME_OVERHEAD..].copy_from_slice(h);
            self.queue_frame(&template, hdr, frame_parts, framing::HEADER_LEN + body)?;
        }
        Ok(())
    }
}

impl DatapathMemory for XdpDatapath {
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

impl Connect for XdpDatapath {
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        let now = Instant::now();
        let ctrl = &mut self.ctrl;
        let r = self
            .stack
            .connect(peer, now, &mut |f: &[u8]| ctrl.push(f.to_vec()));
        self.send_ctrl();
        r.map_err(io::Error::other)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.stack.peer_addr(conn)
    }

    fn local_addr(&self) -> SocketAddrV4 {
        self.stack.local_addr()
    }
}

impl Receive for XdpDatapath {
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        let now = Instant::now();
        let before = out.len();
        self.xsk.recv(&mut self.rx, RX_BURST);
        let drops = self.xsk.stats().rx_no_buffer;
        if drops > self.seen_rx_drops {
            self.stack.count_no_rx_buffer(drops - self.seen_rx_drops);
            self.seen_rx_drops = drops;
        }
        let ctrl = &mut self.ctrl;
        let mut tx = |f: &[u8]| ctrl.push(f.to_vec());
        for frame in self.rx.drain(..) {
            self.stack
                .process_frame(&self.mem, frame, now, out, &mut tx);
        }
        self.stack.poll(now, &mut tx);
        self.send_ctrl();
        self.xsk.poll_completions();
        Ok(out.len() - before)
    }

    fn counters(&self) -> DropCounters {
        self.stack.counters()
    }
}

impl Transmit for XdpDatapath {
    fn mtu(&self) -> usize {
        self.stack.config().mtu
    }

    fn max_segments(&self) -> usize {
        self.max_segments
    }

    fn max_message_len(&self) -> usize {
        self.stack.config().max_message_len
    }

    fn send_object<O: CornflakesObj>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        let sizes = obj.sizes();
        let total = sizes.total();
        let max = self.stack.config().max_message_len;
        if total > max {
            return Err(SendError::TooLarge { len: total, max });
        }
        self.stack.template(conn, 0)?; // unknown or unresolved connections fail before any work
        let mut zc = std::mem::take(&mut self.zc);
        zc.clear();
        let mut keep_all = Demote::NONE;
        obj.for_each_zero_copy(&mut keep_all, &mut |b: &RcBuf| zc.push(b.clone()));
        let r = if total <= self.stack.frame_room() {
            self.send_object_single(conn, msg, obj, &mut zc)
        } else {
            // Segmented: the head is written once into scratch memory and copied into each
            // frame's header buffer; zero-copy leaves are cut at frame boundaries.
            let mut head = std::mem::take(&mut self.head);
            head.clear();
            head.resize(sizes.head(), 0);
            obj.write_header_and_copy(&sizes, &mut head, Demote::NONE, 0);
            let r = self.send_stream(conn, msg, &head, &zc);
            self.head = head;
            r
        };
        zc.clear();
        self.zc = zc;
        r
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        self.send_stream(conn, msg, &[], entries)
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.send_stream(conn, msg, data, &[])
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.xsk.flush().map_err(SendError::Io)
    }
}

impl XdpDatapath {
    /// Serialize-and-send of an object that fits one frame (paper §3.2.3): headers, object
    /// header and copy area in one fresh buffer, then one descriptor per zero-copy leaf;
    /// leaves beyond `max_segments` are demoted with [`Demote::plan`] (via [`plan_chain`]).
    fn send_object_single<O: CornflakesObj>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
        zc: &mut Vec<RcBuf>,
    ) -> Result<(), SendError> {
        let sizes = obj.sizes();
        let total = sizes.total();
        self.entries.clear();
        for b in zc.iter() {
            self.entries.push(Entry {
                len: b.len(),
                umem_addr: self.xsk.umem_offset(b),
            });
        }
        let plan = plan_chain(
            FRAME_OVERHEAD + sizes.head(),
            &self.entries,
            self.max_segments,
            FRAME_SIZE,
        )
        .ok_or(SendError::TooLarge {
            len: total,
            max: self.stack.frame_room(),
        })?;
        let mut hdr = self.mem.alloc(plan.head_len)?;
        let (template, ident) = self.stack.template(conn, 1)?;
        let template = template.clone();
        template.write(&mut hdr, framing::HEADER_LEN + total, ident);
        framing::Repr::single(msg.id, msg.ty, total as u32).emit(&mut hdr[TEMPLATE_LEN..]);
        obj.write_header_and_copy(
            &sizes,
            &mut hdr[FRAME_OVERHEAD..],
            plan.demote,
            plan.demoted_bytes,
        );
        let mut walk = plan.demote;
        zc.retain(|b| walk.keep_zero_copy(b.len()));
        self.queue_frame(&template, hdr, zc, framing::HEADER_LEN + total)
    }
}

impl Completions for XdpDatapath {
    fn poll_completions(&mut self) -> usize {
        self.xsk.poll_completions()
    }

    fn in_flight(&self) -> usize {
        self.xsk.in_flight()
    }
}
