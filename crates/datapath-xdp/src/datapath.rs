//! [`XdpDatapath`]: the Cornflakes [`Datapath`](cornflakes_datapath::Datapath) over one AF_XDP socket.
//!
//! The datapath traits, Ethernet/IPv4/UDP, ARP, framing, segmentation and reassembly are the
//! stack's [`EthDatapath`]; this module is the [`Device`] under it ([`XdpNic`]): it turns
//! frames into UMEM descriptor chains (see [`crate::plan`]) and drives the socket ([`Xsk`]).
//!
//! Single-frame objects take this crate's own serialize-and-send ([`Device::send_object`]),
//! which plans the chain with the real UMEM addresses (a leaf in an item above 4 KiB costs one
//! descriptor per UMEM frame it touches). Segmented objects, scatter-gather arrays, copies and
//! ARP go through the stack's shared paths, posted through [`TxSink`].

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes_datapath::Demote;
use cornflakes_datapath::{ConnId, Msg, SendError, SendObject};
use cornflakes_datapath::{DelegateDatapath, DropCounters};
use cornflakes_mem::{PinnedMemory, PinnedRef, RcBuf};
use cornflakes_stack::checksum::Accumulator;
use cornflakes_stack::device::{Device, EthDatapath};
use cornflakes_stack::iface::{EthStack, StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::template::{HeaderTemplate, TEMPLATE_LEN};
use cornflakes_stack::tx::{self, TxSink};
use cornflakes_stack::wire::{ethernet, framing, ChecksumCaps, MacAddr};

use crate::bpf::{AttachMode, Program, ProgramStats, SharedProgram, XdpProgram};
use crate::plan::{bounce_split, plan_chain, Entry, FRAME_SIZE};
use crate::sys::{self, BindMode, RingSizes};
use crate::xsk::{umem_memory, TxError, Xsk, XskConfig, XskStats, MAX_TX_DESCRIPTORS, RX_HEADROOM};

/// Frames taken from the RX ring per
/// [`Receive::recv_burst`](cornflakes_datapath::Receive::recv_burst).
pub const RX_BURST: usize = 64;
/// Attempts to find room in the TX ring (flushing and reclaiming between attempts).
const TX_RETRIES: usize = 64;

/// Transmit counters of the datapath layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames whose trailing pieces were copied into a bounce buffer to fit `max_segments`.
    pub bounced: u64,
    /// Frames of the stack's shared transmit paths that could not be queued (TX ring still
    /// full after retries, or no buffer for a copy) and were dropped.
    pub dropped: u64,
}

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
    /// IP MTU; `None` uses the interface's. Clamped to the largest pinned item (16 KiB) minus
    /// the Ethernet header.
    pub mtu: Option<usize>,
    /// Bytes of pinned memory = the UMEM (rounded up to 2 MiB). Application values meant to
    /// be sent zero-copy must be allocated from [`DatapathMemory::memory`](cornflakes_datapath::DatapathMemory::memory).
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
    /// Multi-buffer frames (`XDP_USE_SG`): zero-copy chains and jumbo frames. When off, or
    /// when the kernel refuses it (before 6.6), every frame is one descriptor: objects are
    /// copied into one buffer and the MTU is clamped to what one UMEM frame holds.
    pub multi_buffer: bool,
    /// Largest message sent or accepted.
    pub max_message_len: usize,
    /// Static ARP entries.
    pub static_arp: Vec<(Ipv4Addr, MacAddr)>,
    /// `None`: the datapath attaches its own program, redirecting `addr`'s port. `Some`: one
    /// of several datapaths (one per queue and server core, each on its own thread) sharing a
    /// program the caller attached and configured ([`XdpProgram::set_ports`],
    /// [`XdpProgram::set_arp_to_stack`]) and keeps attached while they run; this datapath only
    /// registers its socket for `queue` (`docs/cores.md`).
    pub program: Option<SharedProgram>,
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
            multi_buffer: true,
            max_message_len: 1 << 20,
            static_arp: Vec::new(),
            program: None,
        }
    }
}

/// The datapath's own program, or a handle to one shared with the other queues' datapaths.
enum ProgramHandle {
    Own(XdpProgram),
    Shared(SharedProgram),
}

/// The AF_XDP datapath: the stack's [`EthDatapath`] over one socket's rings ([`XdpNic`]).
/// Create it on the thread (and in the network namespace) that will use it; like the pinned
/// memory, it stays on that thread.
pub struct XdpDatapath {
    eth: EthDatapath<XdpNic>,
}

/// One AF_XDP socket's rings and the XDP program redirecting to it: the [`Device`] under an
/// [`XdpDatapath`].
pub struct XdpNic {
    // Field order is drop order: the socket (and its hold on the frames) first, then the
    // program (detached from the interface), then the rest.
    xsk: Xsk,
    prog: ProgramHandle,
    mem: PinnedMemory,
    caps: ChecksumCaps,
    max_segments: usize,
    rx: Vec<RcBuf>,
    zc: Vec<RcBuf>,
    entries: Vec<Entry>,
    /// The frame being queued (the pieces of the shared paths' posts, or a single-frame object).
    pieces: Vec<RcBuf>,
    /// TX ring slots left, as of the last reclaim minus what was queued since (a frame may take
    /// more descriptors than buffers: each buffer is split at UMEM frames).
    free: usize,
    seen_rx_drops: u64,
    tx_stats: TxStats,
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
        let prog = match &cfg.program {
            Some(shared) => ProgramHandle::Shared(shared.clone()),
            None => {
                let prog = XdpProgram::attach(ifindex, Program::Redirect, cfg.attach)?;
                prog.set_arp_to_stack(cfg.arp_to_stack)?;
                ProgramHandle::Own(prog)
            }
        };
        let mem = umem_memory(cfg.umem_bytes).map_err(io::Error::other)?;
        let xcfg = XskConfig {
            ifindex,
            queue: cfg.queue,
            mode: cfg.mode,
            rings: cfg.rings,
            rx_frames: cfg.rx_frames,
            max_rx_frame: mem.max_item_size(),
            multi_buffer: cfg.multi_buffer,
        };
        let mut xsk = Xsk::new(mem.clone(), &xcfg)?;
        let (max_segments, frame_limit) = if xsk.is_multi_buffer() {
            (max_segments, mem.max_item_size())
        } else {
            (1, FRAME_SIZE - RX_HEADROOM)
        };
        match &prog {
            ProgramHandle::Own(p) => {
                p.register_socket(cfg.queue, xsk.fd())?;
                p.set_port(cfg.addr.port())?;
            }
            ProgramHandle::Shared(p) => p.register_socket(cfg.queue, xsk.fd())?,
        }
        // A frame must fit one pinned item (the largest size class) on both paths: received
        // multi-buffer frames are reassembled into one, and header/bounce buffers are one.
        // Without multi-buffer it must fit one UMEM frame after the receive headroom.
        let mtu = mtu.min(frame_limit - ethernet::HEADER_LEN);
        let mut scfg = StackConfig::new(mac, cfg.addr);
        scfg.mtu = mtu;
        scfg.caps = cfg.caps;
        scfg.max_message_len = cfg.max_message_len;
        scfg.static_arp = cfg.static_arp.clone();
        let free = xsk.tx_free(usize::MAX);
        let nic = XdpNic {
            xsk,
            prog,
            mem: mem.clone(),
            caps: cfg.caps,
            max_segments,
            rx: Vec::with_capacity(RX_BURST),
            zc: Vec::new(),
            entries: Vec::new(),
            pieces: Vec::with_capacity(MAX_TX_DESCRIPTORS),
            free,
            seen_rx_drops: 0,
            tx_stats: TxStats::default(),
        };
        Ok(XdpDatapath {
            eth: EthDatapath::new(nic, mem, scfg),
        })
    }

    /// Our MAC address.
    pub fn mac(&self) -> MacAddr {
        self.eth.stack().config().mac
    }

    /// Whether the socket runs zero-copy (false on veth and other copy-mode devices).
    pub fn is_zero_copy(&self) -> bool {
        self.eth.device().xsk.is_zero_copy()
    }

    /// Socket-layer counters (multi-buffer receives, descriptors sent, ...).
    pub fn xsk_stats(&self) -> XskStats {
        self.eth.device().xsk.stats()
    }

    /// The XDP program's counters (of the shared program: every queue's).
    pub fn program_stats(&self) -> io::Result<ProgramStats> {
        match &self.eth.device().prog {
            ProgramHandle::Own(p) => p.stats(),
            ProgramHandle::Shared(p) => p.stats(),
        }
    }

    /// The kernel's counters for the socket.
    pub fn kernel_stats(&self) -> io::Result<libc::xdp_statistics> {
        self.eth.device().xsk.kernel_stats()
    }

    /// Transmit counters of this layer.
    pub fn tx_stats(&self) -> TxStats {
        self.eth.device().tx_stats
    }

    /// The stack (configuration and counters).
    pub fn stack(&self) -> &EthStack {
        self.eth.stack()
    }
}

impl DelegateDatapath for XdpDatapath {
    type Inner = EthDatapath<XdpNic>;

    #[inline]
    fn inner(&self) -> &EthDatapath<XdpNic> {
        &self.eth
    }

    #[inline]
    fn inner_mut(&mut self) -> &mut EthDatapath<XdpNic> {
        &mut self.eth
    }
}

impl XdpNic {
    /// Reclaims completed descriptors and re-reads the TX ring's free slots.
    fn reclaim(&mut self) -> usize {
        let n = self.xsk.poll_completions();
        self.free = self.xsk.tx_free(usize::MAX);
        n
    }

    /// Queues `self.pieces` as one frame, counting the descriptors it took.
    fn queue_pieces(&mut self) -> Result<usize, SendError> {
        let r = queue_chain(
            &mut self.xsk,
            &self.mem,
            self.max_segments,
            &mut self.pieces,
            &mut self.tx_stats.bounced,
        );
        if let Ok(n) = r {
            self.free = self.free.saturating_sub(n);
        }
        r
    }

    /// Serialize-and-send of an object that fits one frame (paper §3.2.3): headers, object
    /// header and copy area in one fresh buffer, then one descriptor per zero-copy leaf;
    /// leaves beyond `max_segments` are demoted with [`Demote::plan`] (via [`plan_chain`]).
    fn send_object_single<O: SendObject>(
        &mut self,
        stack: &mut EthStack,
        conn: ConnId,
        msg: Msg,
        obj: &O,
        zc: &mut Vec<RcBuf>,
    ) -> Result<(), SendError> {
        let sizes = obj.object_sizes();
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
            max: stack.frame_room(),
        })?;
        let mut hdr = self.mem.alloc(plan.head_len)?;
        let (template, ident) = stack.template(conn, 1)?;
        template.write(&mut hdr, framing::HEADER_LEN + total, ident);
        framing::Repr::single(msg, total as u32).emit(&mut hdr[TEMPLATE_LEN..]);
        obj.write_object_head(
            &sizes,
            &mut hdr[FRAME_OVERHEAD..],
            plan.demote,
            plan.demoted_bytes,
        )?;
        let mut walk = plan.demote;
        zc.retain(|b| walk.keep_zero_copy(b.len()));
        let udp_payload = framing::HEADER_LEN + total;
        if self.caps.udp_tx {
            let mut acc = Accumulator::new();
            acc.add(&hdr[TEMPLATE_LEN..]);
            for b in zc.iter() {
                acc.add(b);
            }
            HeaderTemplate::set_udp_checksum(
                &mut hdr,
                template.udp_checksum(udp_payload, acc.sum()),
            );
        }
        self.pieces.clear();
        self.pieces.push(hdr.freeze());
        self.pieces.append(zc);
        self.queue_pieces().map(drop)
    }
}

/// Queues one frame made of `pieces` (its first piece holds the headers): copies pieces that
/// are not in the UMEM, and if the chain needs more than `max_segments` descriptors copies the
/// trailing pieces into one bounce buffer. Retries a full TX ring after flushing and
/// reclaiming completions. Returns the descriptors used; `pieces` is left empty.
fn queue_chain(
    xsk: &mut Xsk,
    mem: &PinnedMemory,
    max_segments: usize,
    pieces: &mut Vec<RcBuf>,
    bounced: &mut u64,
) -> Result<usize, SendError> {
    let r = queue_chain_inner(xsk, mem, max_segments, pieces, bounced);
    pieces.clear();
    r
}

fn queue_chain_inner(
    xsk: &mut Xsk,
    mem: &PinnedMemory,
    max_segments: usize,
    pieces: &mut Vec<RcBuf>,
    bounced: &mut u64,
) -> Result<usize, SendError> {
    for p in pieces.iter_mut() {
        if xsk.umem_offset(p).is_none() {
            *p = mem.alloc_copy(p)?;
        }
    }
    let cost = |p: &RcBuf| xsk.descriptors_for(std::slice::from_ref(p)).unwrap_or(1);
    let total: usize = pieces.iter().map(cost).sum();
    if total > max_segments {
        let costs: Vec<usize> = pieces.iter().map(cost).collect();
        let lens: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
        let keep = bounce_split(&costs, &lens, max_segments, FRAME_SIZE).ok_or(
            SendError::TooManySegments {
                entries: total,
                max: max_segments,
            },
        )?;
        let rest: usize = lens[keep..].iter().sum();
        let mut bounce = mem.alloc(rest)?;
        let mut at = 0;
        for p in pieces.drain(keep..) {
            bounce[at..at + p.len()].copy_from_slice(&p);
            at += p.len();
        }
        pieces.push(bounce.freeze());
        *bounced += 1;
    }
    let descs = xsk.descriptors_for(pieces).unwrap_or(0);
    for attempt in 0..TX_RETRIES {
        match xsk.send(pieces) {
            Ok(()) => return Ok(descs),
            Err(TxError::RingFull) => {
                xsk.flush()?;
                xsk.poll_completions();
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

/// The stack's shared transmit paths post here: a frame's buffers are collected and queued as
/// one chain at its last one.
impl TxSink for XdpNic {
    fn free_slots(&self) -> usize {
        self.free
    }

    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        self.pieces.push(buf);
        if !end_of_frame {
            return;
        }
        if self.queue_pieces().is_err() {
            self.tx_stats.dropped += 1;
        }
    }
}

impl Device for XdpNic {
    fn max_segments(&self) -> usize {
        self.max_segments
    }

    #[inline]
    fn receive(&mut self, mut frame: impl FnMut(RcBuf)) -> u64 {
        self.xsk.recv(&mut self.rx, RX_BURST);
        for f in self.rx.drain(..) {
            frame(f);
        }
        let drops = self.xsk.stats().rx_no_buffer;
        let new_drops = drops.saturating_sub(self.seen_rx_drops);
        self.seen_rx_drops = drops;
        self.reclaim();
        new_drops
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.xsk.flush().map_err(SendError::Io)
    }

    fn prepare_send(&mut self) {
        // The TX ring's free slots are known only after reclaiming completions.
        self.reclaim();
    }

    fn make_room(&mut self) -> Result<bool, SendError> {
        self.flush()?;
        self.reclaim();
        Ok(true)
    }

    fn poll_completions(&mut self) -> usize {
        self.reclaim()
    }

    fn in_flight(&self) -> usize {
        self.xsk.in_flight()
    }

    fn add_counters(&self, _counters: &mut DropCounters) {
        // Missing receive buffers are counted through `receive`; everything else is the
        // stack's.
    }

    fn send_object<O: SendObject>(
        &mut self,
        stack: &mut EthStack,
        mem: &PinnedMemory,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        let total = obj.object_sizes().total();
        let max = stack.config().max_message_len;
        if total > max {
            return Err(SendError::TooLarge { len: total, max });
        }
        if total > stack.frame_room() {
            // Segmented: the stack's shared path (one header buffer per frame, slices of the
            // head and of the zero-copy leaves).
            let max_segments = self.max_segments;
            return tx::send_object(stack, mem, self, max_segments, conn, msg, obj);
        }
        stack.template(conn, 0)?; // unknown or unresolved connections fail before any work
        let mut zc = std::mem::take(&mut self.zc);
        zc.clear();
        let mut keep_all = Demote::NONE;
        obj.for_each_object_leaf(&mut keep_all, &mut |b: PinnedRef<'_>| zc.push(b.to_rcbuf()));
        let r = self.send_object_single(stack, conn, msg, obj, &mut zc);
        zc.clear();
        self.zc = zc;
        r
    }
}
