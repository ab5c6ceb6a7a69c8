//! The datapath: one DPDK port, one RX and one TX queue ([`IceNic`], a [`Device`]), the
//! stack's [`EthDatapath`] on top ([`IceDatapath`]).
//!
//! # Transmit
//! The stack's serialize-and-send ([`cornflakes_stack::tx`]) posts descriptors to
//! `TxQueue`, which attaches each one to an mbuf as an external buffer (the head buffer with
//! all headers and the copy area first, then one segment per zero-copy entry) and chains the
//! segments of a frame. [`Device::flush`] hands the queued frames to `rte_eth_tx_burst`.
//! Each segment holds a clone of its [`RcBuf`] until DPDK frees the mbuf; see
//! [`crate::ffi::mbuf`].
//!
//! # Receive: zero-copy into pinned memory
//! The RX mempool is made over pinned items (`rte_pktmbuf_pool_create_extbuf`, one item per
//! mbuf), each held by the datapath as an [`RcBuf`] with count 1 (the "pool reference"). A
//! received frame is a slice of that item (count 2 and up); the mbuf is kept aside until the
//! item's count is back to 1, i.e. the application dropped every view, and only then freed to
//! the pool for the NIC to write again. So the NIC never writes a buffer anyone can read.
//! The cost is a scan of the held-aside mbufs per receive burst, and a pool that shrinks while
//! the application holds received buffers (the port then counts `rx_nombuf`, reported as
//! `no_rx_buffers`).
//!
//! Frames in mbufs that are not ours (the `net_ring` PMD hands over the sender's transmit
//! chains) or that span several segments (scattered jumbo frames) are copied into one fresh
//! pinned buffer instead, and the mbuf is freed at once.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cornflakes_datapath::DelegateDatapath;
use cornflakes_datapath::{DropCounters, SendError};
use cornflakes_mem::{MemoryConfig, Region};
use cornflakes_mem::{PinnedMemory, RcBuf};
use cornflakes_stack::device::{Device, EthDatapath};
use cornflakes_stack::tx::TxSink;
use cornflakes_stack::wire::{ethernet, ipv4};
use cornflakes_stack::{EthStack, MacAddr, StackConfig};

use crate::eal_args::EalOptions;
use crate::ffi::eal::{self, DpdkError, RingLink};
use crate::ffi::mbuf::{self, ExtCounters, Mbuf, Mempool};
use crate::ffi::pinned::{iova_of, DmaRegistrations, PinnedRxPool};
use crate::ffi::port::{self, OffloadBits, PortInfo};
use crate::limits;

/// Frames taken from the RX queue per poll.
pub const RX_BURST: usize = 32;

/// Transmit mbufs that may sit in the mempool's per-lcore cache, out of `free_slots`' sight.
const MEMPOOL_CACHE_SLACK: usize = 256;

/// Which port a datapath drives. The datapath owns the port: it configures it, and stops and
/// closes it when dropped.
#[derive(Clone, Debug)]
pub enum PortSpec {
    /// A port the EAL created at start: a PCI address given with `-a` (`0000:3b:00.0`) or a
    /// `--vdev` name (`net_af_packet0`).
    Named(String),
    /// A virtual device probed now from its devargs (`net_af_packet1,iface=veth0`), and
    /// removed again on drop. It is created in the calling thread's network namespace.
    Vdev(String),
    /// One side (0 or 1) of an in-process [`RingLink`].
    Ring(Arc<RingLink>, usize),
}

/// Datapath configuration.
#[derive(Clone, Debug)]
pub struct IceConfig {
    /// The port.
    pub port: PortSpec,
    /// Our IPv4 address and UDP port.
    pub addr: SocketAddrV4,
    /// Our MAC address; `None` = the port's.
    pub mac: Option<MacAddr>,
    /// IP MTU (1500).
    pub mtu: usize,
    /// RX / TX descriptors (adjusted to the port's limits).
    pub rx_descs: u16,
    /// See `rx_descs`.
    pub tx_descs: u16,
    /// Receive buffers (pinned items backing the RX mempool).
    pub rx_buffers: u32,
    /// Size of each receive buffer (a power of two, at most 32 KiB); `None` = just enough for
    /// the MTU ([`limits::rx_buffer_size`]). `net_af_packet` with its default 2048-byte frames
    /// needs 4096.
    pub rx_buffer_size: Option<usize>,
    /// Mbufs for transmit segments (each queued or in-flight segment takes one).
    pub tx_mbufs: u32,
    /// Lower the scatter-gather limit below the port's (tests; `None` = the port's).
    pub max_segments: Option<usize>,
    /// Offload IPv4/UDP transmit checksums when the port offers both.
    pub checksum_offload: bool,
    /// Tests only: mark frames for checksum offload although the port does not offer it
    /// (the offloads are not enabled on the port, so a virtual device passes the frames on
    /// with the IPv4 checksum 0 and the UDP pseudo-header sum, as a NIC would receive them).
    #[doc(hidden)]
    pub pretend_checksum_offload: bool,
    /// Enable promiscuous mode (when `mac` differs from the port's).
    pub promiscuous: bool,
    /// Largest message sent or accepted.
    pub max_message_len: usize,
    /// Static ARP entries.
    pub static_arp: Vec<(Ipv4Addr, MacAddr)>,
    /// The pinned memory. Each region takes one of DPDK's memory-segment lists (128 in all,
    /// some used by the EAL), so regions are large: 32 MiB by default.
    pub memory: MemoryConfig,
}

impl IceConfig {
    /// Defaults for `port` and `addr`: MTU 1500, 1024 descriptors each way, 4096 receive
    /// buffers, 8192 transmit mbufs, checksum offload when offered.
    pub fn new(port: PortSpec, addr: SocketAddrV4) -> IceConfig {
        IceConfig {
            port,
            addr,
            mac: None,
            mtu: 1500,
            rx_descs: 1024,
            tx_descs: 1024,
            rx_buffers: 4096,
            rx_buffer_size: None,
            tx_mbufs: 8192,
            max_segments: None,
            checksum_offload: true,
            pretend_checksum_offload: false,
            promiscuous: false,
            max_message_len: 1 << 20,
            static_arp: Vec::new(),
            memory: MemoryConfig {
                initial_bytes: 32 << 20,
                region_bytes: 32 << 20,
                ..MemoryConfig::default()
            },
        }
    }
}

/// Datapath counters beyond the stack's [`DropCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IceStats {
    /// Frames taken from the RX queue.
    pub rx_frames: u64,
    /// Frames handed to the stack as views of the mbuf's pinned data room.
    pub rx_zero_copy: u64,
    /// Frames copied into a fresh pinned buffer (foreign or multi-segment mbufs).
    pub rx_copied: u64,
    /// Frames the port flagged with a bad IPv4 or L4 checksum (also in `bad_checksum`).
    pub rx_bad_checksum_hw: u64,
    /// Mbufs whose data lay outside their buffer (also in `truncated`).
    pub rx_malformed: u64,
    /// Receive mbufs currently held because the application still has views of them.
    pub rx_held: u64,
    /// Frames queued for transmission.
    pub tx_frames: u64,
    /// Segments (descriptors) queued.
    pub tx_segments: u64,
    /// Frames dropped because an mbuf could not be had mid-frame.
    pub tx_alloc_failures: u64,
    /// `rte_eth_tx_burst` calls.
    pub tx_bursts: u64,
}

/// The transmit side: descriptors posted by the stack become mbuf chains, queued until flush.
pub(crate) struct TxQueue {
    pool: Mempool,
    counters: Rc<ExtCounters>,
    /// Complete frames not yet given to the PMD.
    pending: Vec<Mbuf>,
    pending_segs: usize,
    /// The frame being built and its segment count.
    building: Option<Mbuf>,
    building_segs: usize,
    /// An mbuf could not be had mid-frame: drop the rest of it.
    broken: bool,
    /// Most segments queued before a flush is needed.
    capacity: usize,
    /// Mbufs in `pool`, less a margin for the per-lcore caches.
    pool_size: usize,
    offload: bool,
    frames: u64,
    segments: u64,
    alloc_failures: u64,
}

impl TxQueue {
    fn abandon_frame(&mut self, end_of_frame: bool) {
        self.building = None;
        self.building_segs = 0;
        self.broken = !end_of_frame;
        self.alloc_failures += 1;
    }
}

impl TxSink for TxQueue {
    fn free_slots(&self) -> usize {
        // Every attached mbuf is counted in `in_flight` until DPDK frees it, so the pool's free
        // mbufs are known without asking it (rte_mempool_avail_count walks every lcore cache).
        let pool_free = self.pool_size.saturating_sub(self.counters.in_flight.get());
        self.capacity
            .saturating_sub(self.pending_segs + self.building_segs)
            .min(pool_free)
    }

    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        if self.broken {
            self.broken = !end_of_frame;
            return;
        }
        let iova = iova_of(&buf);
        let Some(mut m) = Mbuf::attach(&self.pool, buf, iova, &self.counters) else {
            self.abandon_frame(end_of_frame);
            return;
        };
        match &mut self.building {
            None => {
                if self.offload {
                    m.request_checksum_offload(
                        ethernet::HEADER_LEN as u16,
                        ipv4::HEADER_LEN as u16,
                    );
                }
                self.building = Some(m);
            }
            Some(head) => {
                if head.chain(m).is_err() {
                    self.abandon_frame(end_of_frame);
                    return;
                }
            }
        }
        self.building_segs += 1;
        self.segments += 1;
        if end_of_frame {
            if let Some(f) = self.building.take() {
                self.pending.push(f);
                self.pending_segs += self.building_segs;
                self.frames += 1;
            }
            self.building_segs = 0;
        }
    }
}

/// The receive side.
pub(crate) struct RxState {
    pub(crate) pins: PinnedRxPool,
    /// Mbufs whose item the application still views, with the item index.
    held: Vec<(Mbuf, u32)>,
    burst: Vec<Mbuf>,
}

impl RxState {
    /// Frees the held mbufs whose views are all gone.
    fn reclaim(&mut self) {
        let pins = &self.pins;
        self.held.retain(|(_, i)| pins.in_use(*i));
    }
}

pub(crate) enum Owned {
    Named,
    Vdev(String),
    Ring(Arc<RingLink>),
    /// One queue pair of a port shared by several cores; the port is released with the
    /// [`CorePort`](crate::cores::CorePort).
    Core(Arc<dyn SharedPort>),
}

/// A port shared by several cores ([`CorePort`](crate::cores::CorePort)), as the datapath on
/// one of its queue pairs sees it when it goes away.
pub(crate) trait SharedPort: Send + Sync {
    /// Stops queue pair `queue`, so the NIC writes no more into that core's buffers.
    fn stop_queue(&self, queue: u16);
    /// Lets go of queue pair `queue` once its buffers are freed; the port itself is released
    /// when the last core and the owner of the port are gone.
    fn release_queue(&self, queue: u16);
}

static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// A Cornflakes datapath over one DPDK port: the stack's [`EthDatapath`] over the port's
/// queue pair ([`IceNic`]). Single-threaded (like its pinned memory): create, use and drop it
/// on one thread.
pub struct IceDatapath {
    eth: EthDatapath<IceNic>,
}

/// One DPDK port's RX/TX queue pair and the pools over pinned memory behind it: the
/// [`Device`] under an [`IceDatapath`]. Dropping it stops and releases the port (or queue).
pub struct IceNic {
    port: u16,
    /// The RX/TX queue pair this datapath polls (0 unless the port is shared by cores).
    queue: u16,
    info: PortInfo,
    owned: Owned,
    max_segments: usize,
    tx: TxQueue,
    rx: RxState,
    reg: Rc<DmaRegistrations>,
    stats: IceStats,
    released_seen: u64,
    // Last: dropped after everything that refers to pinned memory.
    mem: PinnedMemory,
}

/// Initialises the EAL from `opts` (once per process; see [`eal::init`]).
pub fn start_eal(opts: &EalOptions) -> Result<&'static [String], DpdkError> {
    let args = opts.to_args(crate::eal_args::free_hugepages(), std::process::id());
    eal::init(&args)
}

/// What an application's command line gives (`--dpdk-args "..."`, `--bind IP:PORT`,
/// `--mtu N`): starts the EAL with those arguments (plus the defaults of [`EalOptions`], which
/// they override) and opens a datapath on the first device they name (`-a` PCI address, else
/// `--vdev`). For example `-l 2 -a 0000:3b:00.0` drives an E810 port bound to vfio-pci.
pub fn open(dpdk_args: &str, addr: SocketAddrV4, mtu: usize) -> io::Result<IceDatapath> {
    IceDatapath::new(config_from_args(dpdk_args, addr, mtu)?)
}

/// Starts the EAL with `dpdk_args` and the configuration of the first device they name.
pub(crate) fn config_from_args(
    dpdk_args: &str,
    addr: SocketAddrV4,
    mtu: usize,
) -> io::Result<IceConfig> {
    let extra = crate::eal_args::split_args(dpdk_args)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let device = crate::eal_args::first_device(&extra).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the DPDK arguments name no device: add -a <PCI address> or --vdev <devargs>",
        )
    })?;
    let opts = EalOptions {
        pci_allow: Vec::new(),
        extra,
        ..EalOptions::default()
    };
    start_eal(&opts).map_err(io_err)?;
    let af_packet = device.starts_with("net_af_packet");
    let mut cfg = IceConfig::new(PortSpec::Named(device), addr);
    cfg.mtu = mtu;
    if af_packet {
        // It copies whole socket frames (2 KiB by default) into the mbufs.
        cfg.rx_buffer_size = Some(limits::rx_buffer_size(mtu).max(4096));
    }
    Ok(cfg)
}

pub(crate) fn io_err(e: DpdkError) -> io::Error {
    e.into()
}

impl IceDatapath {
    /// Brings the port up: registers the pinned memory with its device, creates the pools,
    /// configures one RX and one TX queue, and starts it. The EAL must be initialised.
    pub fn new(cfg: IceConfig) -> io::Result<IceDatapath> {
        let (port, owned) = resolve_port(&cfg.port)?;
        let guard = PortGuard {
            port,
            owned: Some(owned),
        };
        let info = port::info(port).map_err(io_err)?;
        let bits = OffloadBits::get();
        let plan = Plan::new(&cfg, &info, &bits);
        let (mem, reg, rx, tx) = Self::build_memory(&cfg, &info, plan.offload)?;
        let up = Self::configure_port(&cfg, port, &info, &bits, plan.offload, rx.pins.pool())
            .and_then(|()| port::start(port, cfg.promiscuous).map_err(io_err));
        if let Err(e) = up {
            // The port first (its queues may refer to the pools), then the pools.
            drop(guard);
            drop((rx, tx));
            reg.unregister_all();
            return Err(e);
        }
        let mut guard = guard;
        let owned = guard.owned.take().expect("set above");
        Ok(Self::assemble(
            &cfg,
            cfg.addr,
            (port, 0),
            info,
            owned,
            plan,
            (mem, reg, rx, tx),
        ))
    }

    /// The pinned memory registered with the port's device, and the receive and transmit
    /// pools over it (on failure, nothing stays registered).
    pub(crate) fn build_memory(
        cfg: &IceConfig,
        info: &PortInfo,
        offload: bool,
    ) -> io::Result<CoreMemory> {
        let mem = PinnedMemory::new(cfg.memory.clone())
            .map_err(|e| io::Error::other(format!("pinned memory: {e}")))?;
        let reg = Rc::new(DmaRegistrations::new(info.device));
        let r2 = Rc::clone(&reg);
        if let Err(e) = mem.set_registrar(move |r: &Region| r2.register(r)) {
            reg.unregister_all();
            return Err(e);
        }
        match Self::build_queues(cfg, &mem, offload) {
            Ok((rx, tx)) => Ok((mem, reg, rx, tx)),
            Err(e) => {
                reg.unregister_all();
                Err(e)
            }
        }
    }

    /// The datapath over queue pair `queue` of a started `port`, answering at `addr`.
    pub(crate) fn assemble(
        cfg: &IceConfig,
        addr: SocketAddrV4,
        (port, queue): (u16, u16),
        info: PortInfo,
        owned: Owned,
        plan: Plan,
        (mem, reg, rx, tx): CoreMemory,
    ) -> IceDatapath {
        let mut scfg = StackConfig::new(cfg.mac.unwrap_or(info.mac), addr);
        scfg.mtu = cfg.mtu;
        scfg.caps = plan.caps;
        scfg.max_message_len = cfg.max_message_len;
        scfg.static_arp = cfg.static_arp.clone();
        let nic = IceNic {
            port,
            queue,
            info,
            owned,
            max_segments: plan.max_segments,
            tx,
            rx,
            reg,
            stats: IceStats::default(),
            released_seen: 0,
            mem: mem.clone(),
        };
        IceDatapath {
            eth: EthDatapath::new(nic, mem, scfg),
        }
    }

    /// The RX/TX queue pair this datapath polls (0 unless the port is shared by cores).
    pub fn queue(&self) -> u16 {
        self.eth.device().queue
    }

    pub(crate) fn configure_port(
        cfg: &IceConfig,
        port: u16,
        info: &PortInfo,
        bits: &OffloadBits,
        offload: bool,
        rx_pool: &Mempool,
    ) -> io::Result<()> {
        let (tx_off, rx_off) = Self::port_offloads(info, bits, offload);
        let mtu = u16::try_from(cfg.mtu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU above 65535"))?;
        port::configure(
            port,
            tx_off,
            rx_off,
            mtu,
            cfg.rx_descs,
            cfg.tx_descs,
            rx_pool,
        )
        .map_err(io_err)
    }

    /// The TX and RX offloads to enable on a port: multi-segment transmit, checksums when
    /// `offload`, receive checksum verdicts when offered.
    pub(crate) fn port_offloads(info: &PortInfo, bits: &OffloadBits, offload: bool) -> (u64, u64) {
        let mut tx_off = info.tx_offload_capa & bits.tx_multi_segs;
        if offload {
            tx_off |= info.tx_offload_capa & (bits.tx_ipv4_cksum | bits.tx_udp_cksum);
        }
        let rx_off = info.rx_offload_capa & (bits.rx_ipv4_cksum | bits.rx_udp_cksum);
        (tx_off, rx_off)
    }

    pub(crate) fn build_queues(
        cfg: &IceConfig,
        mem: &PinnedMemory,
        offload: bool,
    ) -> io::Result<(RxState, TxQueue)> {
        let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
        let item = cfg
            .rx_buffer_size
            .unwrap_or_else(|| limits::rx_buffer_size(cfg.mtu))
            .next_power_of_two();
        let pins = PinnedRxPool::new(&format!("cfrx{seq}"), mem, cfg.rx_buffers, item)?;
        let tx_pool = Mempool::pktmbuf(&format!("cftx{seq}"), cfg.tx_mbufs, 0).map_err(io_err)?;

        let rx = RxState {
            pins,
            held: Vec::new(),
            burst: Vec::with_capacity(RX_BURST),
        };
        let tx = TxQueue {
            pool: tx_pool,
            counters: Rc::new(ExtCounters::default()),
            pending: Vec::new(),
            pending_segs: 0,
            building: None,
            building_segs: 0,
            broken: false,
            capacity: (cfg.tx_mbufs as usize / 2).max(64),
            pool_size: (cfg.tx_mbufs as usize).saturating_sub(MEMPOOL_CACHE_SLACK),
            offload,
            frames: 0,
            segments: 0,
            alloc_failures: 0,
        };
        Ok((rx, tx))
    }

    /// The port id.
    pub fn port(&self) -> u16 {
        self.eth.device().port
    }

    /// What the port reported at start.
    pub fn port_info(&self) -> &PortInfo {
        &self.eth.device().info
    }

    /// Our MAC address.
    pub fn mac(&self) -> MacAddr {
        self.eth.stack().config().mac
    }

    /// Whether IPv4/UDP transmit checksums are offloaded to the port.
    pub fn checksum_offload(&self) -> bool {
        self.eth.device().tx.offload
    }

    /// The datapath counters.
    pub fn stats(&self) -> IceStats {
        let nic = self.eth.device();
        IceStats {
            tx_frames: nic.tx.frames,
            tx_segments: nic.tx.segments,
            tx_alloc_failures: nic.tx.alloc_failures,
            rx_held: nic.rx.held.len() as u64,
            ..nic.stats
        }
    }

    /// Receive mbufs free in the pool (not posted to the NIC, not held for the application).
    pub fn rx_free_buffers(&self) -> usize {
        self.eth.device().rx.pins.pool().available()
    }

    /// Frames queued and not yet handed to the port.
    pub fn queued_frames(&self) -> usize {
        self.eth.device().tx.pending.len()
    }

    /// The stack (configuration and counters).
    pub fn stack(&self) -> &EthStack {
        self.eth.stack()
    }
}

impl DelegateDatapath for IceDatapath {
    type Inner = EthDatapath<IceNic>;

    #[inline]
    fn inner(&self) -> &EthDatapath<IceNic> {
        &self.eth
    }

    #[inline]
    fn inner_mut(&mut self) -> &mut EthDatapath<IceNic> {
        &mut self.eth
    }
}

impl IceNic {
    /// Hands one received mbuf's frame to `frame`: a view of our pinned item (the mbuf is
    /// held until the application drops every view), or a copy for foreign and multi-segment
    /// mbufs. Returns whether a receive buffer was missing for the copy.
    fn receive_one(&mut self, m: Mbuf, frame: &mut impl FnMut(RcBuf)) -> bool {
        self.stats.rx_frames += 1;
        let info = m.rx_info();
        if info.ip_checksum_ok == Some(false) || info.l4_checksum_ok == Some(false) {
            self.stats.rx_bad_checksum_hw += 1;
            return false;
        }
        match self.rx.pins.item_of(&info) {
            Some(idx) => {
                let Some(view) = self.rx.pins.view(idx, &info) else {
                    // Lengths past the data room (a PMD bug) or a saturated count.
                    self.stats.rx_malformed += 1;
                    return false;
                };
                self.stats.rx_zero_copy += 1;
                frame(view);
                if self.rx.pins.in_use(idx) {
                    self.rx.held.push((m, idx));
                }
            }
            None => {
                let Ok(mut buf) = self.mem.alloc(info.pkt_len.max(1)) else {
                    return true;
                };
                let n = m.copy_to(&mut buf[..]);
                drop(m);
                buf.set_len(n);
                self.stats.rx_copied += 1;
                frame(buf.freeze());
            }
        }
        false
    }
}

/// What a datapath's port setup decided: checksum capabilities, whether the port offloads
/// them, the scatter-gather limit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) caps: cornflakes_stack::wire::ChecksumCaps,
    pub(crate) offload: bool,
    pub(crate) max_segments: usize,
}

impl Plan {
    pub(crate) fn new(cfg: &IceConfig, info: &PortInfo, bits: &OffloadBits) -> Plan {
        let offered = |bit: u64| info.tx_offload_capa & bit != 0 || cfg.pretend_checksum_offload;
        let caps = limits::checksum_caps(
            cfg.checksum_offload,
            offered(bits.tx_ipv4_cksum),
            offered(bits.tx_udp_cksum),
        );
        Plan {
            caps,
            offload: !caps.ipv4_tx,
            max_segments: limits::tx_segment_limit(
                info.nb_seg_max,
                info.nb_mtu_seg_max,
                cfg.max_segments,
            ),
        }
    }
}

/// One core's pinned memory, its DMA registrations and the queues' pools over it.
pub(crate) type CoreMemory = (PinnedMemory, Rc<DmaRegistrations>, RxState, TxQueue);

/// The port `spec` names, claimed for one owner (an error when a datapath already drives it).
pub(crate) fn resolve_port(spec: &PortSpec) -> io::Result<(u16, Owned)> {
    if !eal::is_initialized() {
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "the DPDK EAL is not initialised (datapath::start_eal first)",
        ));
    }
    let (port, owned) = match spec {
        PortSpec::Named(n) => (
            eal::port_by_name(n).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no DPDK port named {n}"))
            })?,
            Owned::Named,
        ),
        PortSpec::Vdev(args) => {
            let name = args.split(',').next().unwrap_or(args).to_string();
            (eal::add_vdev(args).map_err(io_err)?, Owned::Vdev(name))
        }
        PortSpec::Ring(link, side) => (link.ports()[*side & 1], Owned::Ring(Arc::clone(link))),
    };
    if !claim_port(port) {
        // Not ours to stop or close: another datapath drives it. A vdev we just probed
        // cannot be in use, so `owned` needs no cleanup here.
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("DPDK port {port} already has a datapath"),
        ));
    }
    Ok((port, owned))
}

/// Stops (and releases what it created of) a port when `IceDatapath::new` fails half-way.
pub(crate) struct PortGuard {
    pub(crate) port: u16,
    pub(crate) owned: Option<Owned>,
}

impl Drop for PortGuard {
    fn drop(&mut self) {
        if let Some(o) = self.owned.take() {
            port::stop(self.port);
            release_port(self.port, o);
        }
    }
}

/// Ports driven by a datapath in this process.
static PORTS_IN_USE: Mutex<Vec<u16>> = Mutex::new(Vec::new());

fn claim_port(p: u16) -> bool {
    let mut v = PORTS_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
    if v.contains(&p) {
        return false;
    }
    v.push(p);
    true
}

pub(crate) fn release_port(p: u16, owned: Owned) {
    PORTS_IN_USE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&q| q != p);
    match owned {
        Owned::Named => port::close(p),
        Owned::Vdev(name) => {
            port::close(p);
            // The vdev was ours; failing to remove it only leaks the name.
            let _ = eal::remove_vdev(&name);
        }
        Owned::Ring(link) => {
            link.drain_tx_of(p);
        }
        // Released by the CorePort when its last core is gone.
        Owned::Core(_) => {}
    }
}

impl Drop for IceNic {
    fn drop(&mut self) {
        match &self.owned {
            // Only this core's queue pair (or, when the PMD cannot stop one queue, the whole
            // port: the NIC must not write into this core's buffers once they are freed).
            Owned::Core(cp) => cp.stop_queue(self.queue),
            _ => port::stop(self.port),
        }
        // Frames never handed over: freeing them releases their buffers.
        self.tx.building = None;
        self.tx.pending.clear();
        // Received mbufs held for the application go back to the pool; the application's
        // views stay valid (they reference pinned memory, not the mbuf).
        self.rx.held.clear();
        self.rx.burst.clear();
        // Closes the port (its queues free what they hold) or, for a ring port, drains the
        // ring it sends into: afterwards no mbuf of ours is in any queue.
        let owned = std::mem::replace(&mut self.owned, Owned::Named);
        match owned {
            // Drains this core's TX ring (ring ports); the port itself is released when the
            // last core and the CorePort are gone.
            Owned::Core(cp) => cp.release_queue(self.queue),
            owned => release_port(self.port, owned),
        }
        self.reg.unregister_all();
        // Pools and the pinned items behind the RX pool are dropped with the fields, RX pool
        // first (field order in `RxState`), and `mem` last.
    }
}

impl std::fmt::Debug for IceDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nic = self.eth.device();
        f.debug_struct("IceDatapath")
            .field("port", &nic.port)
            .field("driver", &nic.info.driver)
            .field("max_segments", &nic.max_segments)
            .field("checksum_offload", &nic.tx.offload)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Device for IceNic {
    fn max_segments(&self) -> usize {
        self.max_segments
    }

    #[inline]
    fn receive(&mut self, mut frame: impl FnMut(RcBuf)) -> u64 {
        self.rx.reclaim();
        let mut burst = std::mem::take(&mut self.rx.burst);
        mbuf::rx_burst_queue(self.port, self.queue, &mut burst, RX_BURST);
        let mut no_buffer = 0;
        for m in burst.drain(..) {
            no_buffer += u64::from(self.receive_one(m, &mut frame));
        }
        self.rx.burst = burst;
        no_buffer
    }

    fn flush(&mut self) -> Result<(), SendError> {
        let mut idle = 0;
        while !self.tx.pending.is_empty() {
            let sent = mbuf::tx_burst_queue(self.port, self.queue, &mut self.tx.pending);
            self.stats.tx_bursts += 1;
            if sent == 0 {
                // Descriptor ring full: reclaim completed descriptors and retry a few times.
                idle += 1;
                port::tx_done_cleanup_queue(self.port, self.queue);
                if idle > 3 {
                    self.tx.pending_segs = self.tx.pending.iter().map(Mbuf::segments).sum();
                    return Err(SendError::Full);
                }
            }
        }
        self.tx.pending_segs = 0;
        Ok(())
    }

    fn prepare_send(&mut self) {
        // `free_slots` counts the queue's segments and the mbufs in flight itself.
    }

    fn make_room(&mut self) -> Result<bool, SendError> {
        // Hand the queued frames over and reclaim what the port is done with, then retry once.
        self.flush()?;
        port::tx_done_cleanup_queue(self.port, self.queue);
        Ok(true)
    }

    fn poll_completions(&mut self) -> usize {
        port::tx_done_cleanup_queue(self.port, self.queue);
        let released = self.tx.counters.released.get();
        let n = released - self.released_seen;
        self.released_seen = released;
        n as usize
    }

    fn in_flight(&self) -> usize {
        self.tx.counters.in_flight.get()
    }

    fn add_counters(&self, c: &mut DropCounters) {
        c.bad_checksum += self.stats.rx_bad_checksum_hw;
        c.truncated += self.stats.rx_malformed;
        c.no_rx_buffers += port::rx_nombuf(self.port);
    }
}

impl TxSink for IceNic {
    #[inline]
    fn free_slots(&self) -> usize {
        self.tx.free_slots()
    }

    #[inline]
    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        self.tx.post(buf, end_of_frame)
    }
}
