//! The hardware side (feature `mlx5`): rdma-core bindings and the ConnectX queue memory.
//!
//! Setup only; nothing here is on the per-packet path. [`open`] finds the device (by name or
//! PCI address), allocates a protection domain, registers every region of the pinned memory
//! (`ibv_reg_mr`, lkey stored as the region's registration, later regions through the
//! registrar), creates two CQs and a raw-packet QP through mlx5dv, moves the QP to
//! ready-to-send, installs the flow rules ([`crate::flow_rules`]: one per destination UDP
//! port, so several QPs, one per server core, can share a port) and exposes the queue
//! buffers, doorbell records and BlueFlame register from `mlx5dv_init_obj` as a
//! [`QueueMemory`] for the generic hot path.

use std::cell::RefCell;
use std::ffi::CStr;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::rc::Rc;

use cornflakes_mem::PinnedMemory;
use cornflakes_mem::Region;
use cornflakes_stack::wire::MacAddr;

use crate::datapath::{DeviceCaps, Mlx5Config, Mlx5Datapath};
use crate::mmio;
use crate::prm::{MLX5_RCV_DBR, MLX5_SND_DBR};
use crate::queue::{QueueMemory, Ring};

/// Bindgen output for `shim/shim.h` (libibverbs, mlx5dv and the shim's wrappers).
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    missing_docs
)]
pub mod sys {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

/// Where and how to open the device.
#[derive(Clone, Debug)]
pub struct HwConfig {
    /// An RDMA device name (`mlx5_0`) or the PCI address of its function (`0000:3b:00.0`).
    pub device: String,
    /// The port (1 on Ethernet ConnectX functions).
    pub port: u8,
    /// Send WQEs requested (the provider rounds the ring up to a power of two of WQEBBs).
    pub sq_wqes: u32,
    /// Receive WQEs requested.
    pub rq_wqes: u32,
    /// Entries per completion queue requested.
    pub cq_entries: u32,
    /// Gather entries per send WQE requested (capped by the device).
    pub max_send_sge: usize,
    /// Header bytes inlined in the Ethernet segment (18 covers what every ConnectX needs in
    /// the default L2 inline mode; raise it for devices that require L3/L4 inline).
    pub inline_len: usize,
    /// Offload IPv4/UDP checksums when the device can.
    pub csum_offload: bool,
    /// Steer ARP (to our MAC and broadcast) to this QP as well as our UDP port. When several
    /// QPs share a port (one per server core), only one of them (core 0) should take ARP.
    pub steer_arp: bool,
}

impl HwConfig {
    /// Defaults for `device`: port 1, 1024 send and receive WQEs, 4096-entry CQs, 16 gather
    /// entries, 18 inline bytes, checksum offload.
    pub fn new(device: impl Into<String>) -> HwConfig {
        HwConfig {
            device: device.into(),
            port: 1,
            sq_wqes: 1024,
            rq_wqes: 1024,
            cq_entries: 4096,
            max_send_sge: 16,
            inline_len: 18,
            csum_offload: true,
            steer_arp: true,
        }
    }
}

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// One RDMA device found on the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The verbs name (`mlx5_0`).
    pub name: String,
    /// The PCI address of its function, when sysfs tells.
    pub pci: Option<String>,
}

/// The RDMA devices present. A machine without RDMA support (`ibv_get_device_list` fails with
/// `ENOSYS`: no kernel uverbs) or without devices gives an empty list, not an error.
pub fn devices() -> io::Result<Vec<DeviceInfo>> {
    let mut n: libc::c_int = 0;
    // SAFETY: `n` is a valid out-pointer; the list is freed below.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS) | Some(libc::ENODEV) | Some(libc::ENOENT) | Some(0) | None => {
                Ok(Vec::new())
            }
            _ => Err(io::Error::new(
                e.kind(),
                format!("ibv_get_device_list: {e}"),
            )),
        };
    }
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: `list` holds `n` device pointers.
        let dev = unsafe { *list.add(i) };
        // SAFETY: a device of the list; the name is a NUL-terminated string owned by it.
        let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) }
            .to_string_lossy()
            .into_owned();
        out.push(DeviceInfo {
            pci: pci_address(&name),
            name,
        });
    }
    // SAFETY: `list` came from ibv_get_device_list and is freed once.
    unsafe { sys::ibv_free_device_list(list) };
    Ok(out)
}

fn sysfs_dev(name: &str) -> PathBuf {
    PathBuf::from("/sys/class/infiniband")
        .join(name)
        .join("device")
}

fn pci_address(name: &str) -> Option<String> {
    let target = fs::read_link(sysfs_dev(name)).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// The Ethernet interface of an RDMA device: its MAC address and MTU (from sysfs).
pub fn netdev_info(name: &str) -> io::Result<(MacAddr, usize)> {
    let dir = sysfs_dev(name).join("net");
    let ifname = fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .next()
        .ok_or_else(|| io::Error::other(format!("{}: no network interface", dir.display())))?;
    let mac_s = fs::read_to_string(ifname.join("address"))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = mac_s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(io::Error::other(format!("bad MAC address {mac_s:?}")));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(io::Error::other)?;
    }
    let mtu = fs::read_to_string(ifname.join("mtu"))?
        .trim()
        .parse()
        .map_err(io::Error::other)?;
    Ok((MacAddr(mac), mtu))
}

struct Context {
    ctx: NonNull<sys::ibv_context>,
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device; every object created from it (PD, CQs, QP,
        // flows) holds an Rc to this and is destroyed first.
        unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
    }
}

fn open_context(device: &str) -> io::Result<(Context, String)> {
    let mut n: libc::c_int = 0;
    // SAFETY: as in `devices`.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no RDMA devices ({})", io::Error::last_os_error()),
        ));
    }
    let mut found = None;
    for i in 0..n.max(0) as usize {
        // SAFETY: `list` holds `n` device pointers.
        let dev = unsafe { *list.add(i) };
        // SAFETY: as in `devices`.
        let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) }
            .to_string_lossy()
            .into_owned();
        if name == device || pci_address(&name).as_deref() == Some(device) {
            found = Some((dev, name));
            break;
        }
    }
    let result = match found {
        None => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no RDMA device named {device:?} (by name or PCI address)"),
        )),
        Some((dev, name)) => {
            // SAFETY: `dev` is an entry of the live list.
            let ctx = unsafe { sys::ibv_open_device(dev) };
            NonNull::new(ctx)
                .map(|ctx| (Context { ctx }, name))
                .ok_or_else(|| last_err("ibv_open_device"))
        }
    };
    // SAFETY: freed once; an opened context stays valid after the list is freed.
    unsafe { sys::ibv_free_device_list(list) };
    result
}

/// The protection domain and the memory regions registered in it.
struct Pd {
    pd: NonNull<sys::ibv_pd>,
    mrs: RefCell<Vec<NonNull<sys::ibv_mr>>>,
    _ctx: Rc<Context>,
}

impl Pd {
    fn register(&self, r: &Region) -> io::Result<Option<u64>> {
        let access = sys::IBV_ACCESS_LOCAL_WRITE as libc::c_int;
        // SAFETY: the region is a live mapping of `r.len()` bytes; it stays mapped until its
        // PinnedMemory is gone, which also drops the registrar holding this PD.
        let mr = unsafe { sys::cf_ibv_reg_mr(self.pd.as_ptr(), r.base().cast(), r.len(), access) };
        let mr = NonNull::new(mr).ok_or_else(|| last_err("ibv_reg_mr"))?;
        // SAFETY: a registered MR; `lkey` is plain data.
        let lkey = unsafe { mr.as_ref().lkey };
        self.mrs.borrow_mut().push(mr);
        Ok(Some(u64::from(lkey)))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        for mr in self.mrs.borrow_mut().drain(..) {
            // SAFETY: registered by `register`, deregistered once; the QP using them is
            // destroyed first (the queues hold an Rc to this PD).
            unsafe { sys::ibv_dereg_mr(mr.as_ptr()) };
        }
        // SAFETY: allocated by ibv_alloc_pd; no MR or QP remains in it.
        unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
    }
}

/// The queue pair, its CQs and flow rules, and their memory from `mlx5dv_init_obj`.
pub struct HwQueues {
    qp: NonNull<sys::ibv_qp>,
    send_cq: NonNull<sys::ibv_cq>,
    recv_cq: NonNull<sys::ibv_cq>,
    flows: Vec<NonNull<sys::ibv_flow>>,
    dv_qp: sys::mlx5dv_qp,
    dv_scq: sys::mlx5dv_cq,
    dv_rcq: sys::mlx5dv_cq,
    bf_offset: usize,
    port: u8,
    _pd: Rc<Pd>,
    _ctx: Rc<Context>,
}

impl HwQueues {
    fn modify(&self, state: sys::ibv_qp_state, with_port: bool) -> io::Result<()> {
        let mut attr = sys::ibv_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        let mut mask = sys::IBV_QP_STATE;
        if with_port {
            attr.port_num = self.port;
            mask |= sys::IBV_QP_PORT;
        }
        // SAFETY: a live QP and a fully initialised attribute struct.
        let rc = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), &mut attr, mask as libc::c_int) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// RESET → INIT → RTR → RTS (a raw-packet QP needs only the port).
    fn bring_up(&self) -> io::Result<()> {
        self.modify(sys::IBV_QPS_INIT, true)?;
        self.modify(sys::IBV_QPS_RTR, false)?;
        self.modify(sys::IBV_QPS_RTS, false)
    }

    fn ring(buf: *mut libc::c_void, cnt: u32, stride: u32) -> Ring {
        Ring {
            // SAFETY: `open` refused queues whose buffers mlx5dv_init_obj left NULL.
            base: unsafe { NonNull::new_unchecked(buf.cast()) },
            entries: cnt,
            stride,
        }
    }

    /// Whether mlx5dv_init_obj filled in every pointer and geometry the hot path relies on.
    fn check_geometry(&self) -> io::Result<()> {
        let (qp, s, r) = (&self.dv_qp, &self.dv_scq, &self.dv_rcq);
        let pointers = [
            qp.dbrec.cast::<u8>(),
            qp.sq.buf.cast(),
            qp.rq.buf.cast(),
            qp.bf.reg.cast(),
            s.buf.cast(),
            s.dbrec.cast(),
            r.buf.cast(),
            r.dbrec.cast(),
        ];
        let counts = [qp.sq.wqe_cnt, qp.rq.wqe_cnt, s.cqe_cnt, r.cqe_cnt];
        if pointers.iter().any(|p| p.is_null())
            || counts.iter().any(|c| !c.is_power_of_two())
            || qp.sq.stride != 64
            || s.cqe_size != 64
            || r.cqe_size != 64
        {
            return Err(io::Error::other(format!(
                "unexpected queue geometry from mlx5dv_init_obj: SQ {}x{}, RQ {}x{}, CQs {}x{} /                  {}x{}",
                qp.sq.wqe_cnt,
                qp.sq.stride,
                qp.rq.wqe_cnt,
                qp.rq.stride,
                s.cqe_cnt,
                s.cqe_size,
                r.cqe_cnt,
                r.cqe_size
            )));
        }
        Ok(())
    }
}

// SAFETY: the rings, doorbell records and BlueFlame register come from mlx5dv_init_obj for the
// QP and CQs this value owns (destroyed in Drop, after which nothing uses the pointers); the
// provider sizes them as reported (power-of-two counts; `open` checks the strides).
unsafe impl QueueMemory for HwQueues {
    fn sq(&self) -> Ring {
        Self::ring(
            self.dv_qp.sq.buf,
            self.dv_qp.sq.wqe_cnt,
            self.dv_qp.sq.stride,
        )
    }

    fn rq(&self) -> Ring {
        Self::ring(
            self.dv_qp.rq.buf,
            self.dv_qp.rq.wqe_cnt,
            self.dv_qp.rq.stride,
        )
    }

    fn send_cq(&self) -> Ring {
        Self::ring(self.dv_scq.buf, self.dv_scq.cqe_cnt, self.dv_scq.cqe_size)
    }

    fn recv_cq(&self) -> Ring {
        Self::ring(self.dv_rcq.buf, self.dv_rcq.cqe_cnt, self.dv_rcq.cqe_size)
    }

    fn sq_dbrec(&self) -> NonNull<u32> {
        // SAFETY: the QP doorbell record is two __be32s: [MLX5_RCV_DBR, MLX5_SND_DBR].
        unsafe { NonNull::new_unchecked(self.dv_qp.dbrec.add(MLX5_SND_DBR)) }
    }

    fn rq_dbrec(&self) -> NonNull<u32> {
        // SAFETY: as above.
        unsafe { NonNull::new_unchecked(self.dv_qp.dbrec.add(MLX5_RCV_DBR)) }
    }

    fn send_cq_dbrec(&self) -> NonNull<u32> {
        // SAFETY: the CQ doorbell record's first word is the consumer index (set_ci).
        unsafe { NonNull::new_unchecked(self.dv_scq.dbrec) }
    }

    fn recv_cq_dbrec(&self) -> NonNull<u32> {
        // SAFETY: as above.
        unsafe { NonNull::new_unchecked(self.dv_rcq.dbrec) }
    }

    fn qpn(&self) -> u32 {
        // SAFETY: a live QP; `qp_num` is plain data set at creation.
        unsafe { self.qp.as_ref().qp_num }
    }

    fn ring_doorbell(&mut self, word: u64) {
        // SAFETY: `bf.reg` is the mapped BlueFlame/UAR page of this QP; `bf_offset` alternates
        // between its two halves (0 and bf.size), both inside the page and 8-aligned.
        unsafe {
            let reg = self.dv_qp.bf.reg.cast::<u8>().add(self.bf_offset);
            mmio::write_reg64(reg.cast(), word);
        }
        if self.dv_qp.bf.size > 0 {
            self.bf_offset ^= self.dv_qp.bf.size as usize;
        }
    }

    fn qp_reset(&mut self) -> io::Result<()> {
        // Synchronous in firmware: when it returns, the QP does no more DMA and writes no CQEs.
        self.modify(sys::IBV_QPS_RESET, false)?;
        self.bf_offset = 0;
        Ok(())
    }

    fn qp_ready(&mut self) -> io::Result<()> {
        self.bring_up()
    }
}

impl Drop for HwQueues {
    fn drop(&mut self) {
        // SAFETY: each object was created by `open` and is destroyed once, flows before the
        // QP and the QP before its CQs, as rdma-core requires.
        unsafe {
            for f in self.flows.drain(..) {
                sys::cf_ibv_destroy_flow(f.as_ptr());
            }
            sys::ibv_destroy_qp(self.qp.as_ptr());
            sys::ibv_destroy_cq(self.send_cq.as_ptr());
            sys::ibv_destroy_cq(self.recv_cq.as_ptr());
        }
    }
}

fn create_cq(ctx: &Context, entries: u32) -> io::Result<NonNull<sys::ibv_cq>> {
    let mut attr = sys::ibv_cq_init_attr_ex {
        cqe: entries,
        ..Default::default()
    };
    let mut dv = sys::mlx5dv_cq_init_attr::default();
    // SAFETY: a live context and initialised attribute structs.
    let cq = unsafe { sys::mlx5dv_create_cq(ctx.ctx.as_ptr(), &mut attr, &mut dv) };
    if cq.is_null() {
        return Err(last_err("mlx5dv_create_cq"));
    }
    // SAFETY: `cq` is a live extended CQ.
    let cq = unsafe { sys::cf_ibv_cq_ex_to_cq(cq) };
    NonNull::new(cq).ok_or_else(|| io::Error::other("ibv_cq_ex_to_cq returned NULL"))
}

/// A server's datapath on ConnectX `device` (RDMA name or PCI address) answering at `bind`:
/// pinned memory whose items hold a frame of IP MTU `mtu` and at least `min_item` bytes
/// (16 KiB when smaller), `extra_bytes` more than the default memory limit (e.g. a
/// calibration array), the interface's own MAC. Shared by the echo, calibration and KV
/// servers' `--datapath mlx5`. The error names the devices present.
pub fn open_server(
    device: &str,
    bind: std::net::SocketAddrV4,
    mtu: usize,
    min_item: usize,
    extra_bytes: usize,
) -> Result<Mlx5Datapath<HwQueues>, String> {
    open_server_with(&HwConfig::new(device), bind, mtu, min_item, extra_bytes)
}

/// Server core `core`'s datapath on ConnectX `device`, one of several sharing its port (the
/// many-core server of issue 12): its own device context, protection domain, pinned memory,
/// QP and CQs, answering at `base`'s address and UDP port [`crate::core_port`]`(base.port(),
/// core)`, with one `ibv_create_flow` rule steering that destination port to its QP (plus
/// ARP on core 0: [`crate::core_flow_rules`]). A client picks the core, and so the key
/// shard, by destination port. Other arguments as in [`open_server`].
///
/// Call it **on the thread that will run the core**: the datapath is `!Send`, like its
/// pinned memory. For N cores, spawn N threads and call this with `core` = 0..N on each; the
/// cores share nothing (the device serves their QPs in parallel).
pub fn open_server_core(
    device: &str,
    base: std::net::SocketAddrV4,
    core: usize,
    mtu: usize,
    min_item: usize,
    extra_bytes: usize,
) -> Result<Mlx5Datapath<HwQueues>, String> {
    let port = crate::core_port(base.port(), core)?;
    let hw = HwConfig {
        steer_arp: core == 0,
        ..HwConfig::new(device)
    };
    let bind = std::net::SocketAddrV4::new(*base.ip(), port);
    open_server_with(&hw, bind, mtu, min_item, extra_bytes).map_err(|e| format!("core {core}: {e}"))
}

/// `cc.cores` share-nothing server cores on one port of ConnectX `device` (`percore`: one
/// thread per core, pinned unless `cc.pin` is off): on core *i*'s own thread,
/// [`open_server_core`]`(device, base, i, mtu, min_item, extra_bytes)` and then `serve(dp,
/// core, ready, info)`, where `info` is what the core reports once set up: its address
/// ([`percore::core_addr`]: `base`'s port plus *i*) and `ConnectX {device}, queue set {i}`.
/// `serve` builds the core's server on `dp`, calls `ready.ready(info)`, polls until
/// `core.stop()` and returns the core's counters. Returns when every core is ready; an error
/// (from any core's opening or `serve`'s setup) stops the others and names the core.
pub fn spawn_server_cores<S, F>(
    device: &str,
    base: std::net::SocketAddrV4,
    mtu: usize,
    min_item: usize,
    extra_bytes: usize,
    cc: &percore::CoresConfig,
    serve: F,
) -> Result<percore::Cores<percore::QueueInfo, S>, String>
where
    S: Send + 'static,
    F: Fn(
            Mlx5Datapath<HwQueues>,
            &percore::Core,
            percore::Ready<percore::QueueInfo>,
            percore::QueueInfo,
        ) -> Result<S, String>
        + Send
        + Sync
        + 'static,
{
    let device = device.to_owned();
    percore::Cores::spawn(cc, move |core, ready| {
        let i = core.index();
        let addr = percore::core_addr(base, i)?;
        // On this core's thread: the datapath and its pinned memory are `!Send`.
        let dp = open_server_core(&device, base, i, mtu, min_item, extra_bytes)?;
        let what = format!("ConnectX {device}, queue set {i}");
        serve(dp, &core, ready, (addr, what))
    })
}

fn open_server_with(
    hw: &HwConfig,
    bind: std::net::SocketAddrV4,
    mtu: usize,
    min_item: usize,
    extra_bytes: usize,
) -> Result<Mlx5Datapath<HwQueues>, String> {
    use cornflakes_mem::MemoryConfig;
    let device = hw.device.as_str();
    let defaults = MemoryConfig::default();
    let mem = PinnedMemory::new(MemoryConfig {
        max_item_size: (mtu + 64)
            .next_power_of_two()
            .max(min_item.next_power_of_two())
            .max(16 * 1024),
        max_bytes: defaults.max_bytes + extra_bytes,
        ..defaults
    })
    .map_err(|e| format!("pinned memory: {e}"))?;
    // MacAddr::ZERO: the interface's own MAC (read from sysfs by `open`).
    let stack = cornflakes_stack::iface::StackConfig::new(MacAddr::ZERO, bind);
    open(hw, mem, Mlx5Config::new(stack)).map_err(|e| {
        format!(
            "opening ConnectX device {device:?}: {e} (devices: {:?})",
            devices()
        )
    })
}

/// Opens the device and builds a [`Mlx5Datapath`] on it. `mem` is registered with the
/// device (now and as it grows). When `cfg.stack.mac` is all zeros, the interface's MAC is
/// used. Needs `CAP_NET_RAW` (raw-packet QP) and the device's Ethernet port up.
pub fn open(
    hw: &HwConfig,
    mem: PinnedMemory,
    mut cfg: Mlx5Config,
) -> io::Result<Mlx5Datapath<HwQueues>> {
    let (ctx, name) = open_context(&hw.device)?;
    let ctx = Rc::new(ctx);
    let (mac, netdev_mtu) = netdev_info(&name)?;
    if cfg.stack.mac == MacAddr::ZERO {
        cfg.stack.mac = mac;
    }

    let mut dattr = sys::ibv_device_attr_ex::default();
    // SAFETY: a live context and a zeroed out-struct.
    let rc = unsafe { sys::cf_ibv_query_device_ex(ctx.ctx.as_ptr(), &mut dattr) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut pattr = sys::ibv_port_attr::default();
    // SAFETY: as above.
    let rc = unsafe { sys::cf_ibv_query_port(ctx.ctx.as_ptr(), hw.port, &mut pattr) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    if pattr.link_layer != sys::IBV_LINK_LAYER_ETHERNET as u8 {
        return Err(io::Error::other(format!(
            "{name} port {}: not an Ethernet port",
            hw.port
        )));
    }
    let csum = hw.csum_offload
        && (dattr.raw_packet_caps & sys::IBV_RAW_PACKET_CAP_IP_CSUM != 0
            || dattr.orig_attr.device_cap_flags & sys::IBV_DEVICE_RAW_IP_CSUM != 0);
    let max_sge = hw.max_send_sge.min(dattr.orig_attr.max_sge.max(1) as usize);

    // SAFETY: a live context.
    let pd = unsafe { sys::ibv_alloc_pd(ctx.ctx.as_ptr()) };
    let pd = Rc::new(Pd {
        pd: NonNull::new(pd).ok_or_else(|| last_err("ibv_alloc_pd"))?,
        mrs: RefCell::new(Vec::new()),
        _ctx: ctx.clone(),
    });
    let reg = pd.clone();
    mem.set_registrar(move |r: &Region| reg.register(r))?;

    let cq_entries = hw.cq_entries.max(hw.sq_wqes).max(hw.rq_wqes);
    let send_cq = create_cq(&ctx, cq_entries)?;
    let recv_cq = match create_cq(&ctx, cq_entries) {
        Ok(c) => c,
        Err(e) => {
            // SAFETY: created above, destroyed once.
            unsafe { sys::ibv_destroy_cq(send_cq.as_ptr()) };
            return Err(e);
        }
    };
    let mut qattr = sys::ibv_qp_init_attr_ex {
        send_cq: send_cq.as_ptr(),
        recv_cq: recv_cq.as_ptr(),
        qp_type: sys::IBV_QPT_RAW_PACKET,
        comp_mask: sys::IBV_QP_INIT_ATTR_PD,
        pd: pd.pd.as_ptr(),
        ..Default::default()
    };
    qattr.cap.max_send_wr = hw.sq_wqes;
    qattr.cap.max_recv_wr = hw.rq_wqes;
    qattr.cap.max_send_sge = max_sge as u32;
    qattr.cap.max_recv_sge = 1;
    qattr.cap.max_inline_data = hw.inline_len as u32;
    let mut dvq = sys::mlx5dv_qp_init_attr::default();
    // SAFETY: a live context, PD and CQs; initialised attribute structs.
    let qp = unsafe { sys::mlx5dv_create_qp(ctx.ctx.as_ptr(), &mut qattr, &mut dvq) };
    let Some(qp) = NonNull::new(qp) else {
        let e = last_err("mlx5dv_create_qp (raw packet; needs CAP_NET_RAW)");
        // SAFETY: created above, destroyed once.
        unsafe {
            sys::ibv_destroy_cq(send_cq.as_ptr());
            sys::ibv_destroy_cq(recv_cq.as_ptr());
        }
        return Err(e);
    };
    let mut q = HwQueues {
        qp,
        send_cq,
        recv_cq,
        flows: Vec::new(),
        dv_qp: sys::mlx5dv_qp::default(),
        dv_scq: sys::mlx5dv_cq::default(),
        dv_rcq: sys::mlx5dv_cq::default(),
        bf_offset: 0,
        port: hw.port,
        _pd: pd,
        _ctx: ctx,
    };
    // From here on, dropping `q` destroys the QP and CQs.
    let mut obj = sys::mlx5dv_obj::default();
    obj.qp.in_ = q.qp.as_ptr();
    obj.qp.out = &mut q.dv_qp;
    // Two CQs: init_obj fills one CQ per call.
    obj.cq.in_ = q.send_cq.as_ptr();
    obj.cq.out = &mut q.dv_scq;
    // SAFETY: `obj` names live objects and out-structs that outlive the call.
    let rc =
        unsafe { sys::mlx5dv_init_obj(&mut obj, (sys::MLX5DV_OBJ_QP | sys::MLX5DV_OBJ_CQ) as u64) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc.abs()));
    }
    let mut obj = sys::mlx5dv_obj::default();
    obj.cq.in_ = q.recv_cq.as_ptr();
    obj.cq.out = &mut q.dv_rcq;
    // SAFETY: as above.
    let rc = unsafe { sys::mlx5dv_init_obj(&mut obj, sys::MLX5DV_OBJ_CQ as u64) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc.abs()));
    }
    q.check_geometry()?;
    q.bring_up()?;
    let mut rules = crate::flow_rules(cfg.stack.mac, cfg.stack.addr.port());
    if !hw.steer_arp {
        rules.retain(|r| r.ethertype == crate::ETHERTYPE_IPV4);
    }
    for rule in rules {
        let port = rule.udp_dst_port.map_or(-1, i32::from);
        // SAFETY: a live QP; the MAC is 6 readable bytes.
        let f = unsafe {
            sys::cf_create_flow(
                q.qp.as_ptr(),
                hw.port,
                rule.dst_mac.0.as_ptr(),
                rule.ethertype,
                port,
            )
        };
        q.flows
            .push(NonNull::new(f).ok_or_else(|| last_err("ibv_create_flow"))?);
    }
    let caps = DeviceCaps {
        max_send_sge: max_sge,
        inline_len: hw.inline_len,
        mtu: netdev_mtu,
        csum_offload: csum,
    };
    Mlx5Datapath::new(q, mem, caps, cfg)
}

#[cfg(test)]
mod tests {
    use super::sys;
    use crate::prm::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_mlx5dv_h() {
        assert_eq!(size_of::<CtrlSeg>(), size_of::<sys::mlx5_wqe_ctrl_seg>());
        let mut c = [0usize; 4];
        // SAFETY: the shim writes four size_t values into the array.
        unsafe { sys::cf_ctrl_seg_offsets(c.as_mut_ptr()) };
        assert_eq!(
            c,
            [
                offset_of!(CtrlSeg, qpn_ds),
                offset_of!(CtrlSeg, signature),
                offset_of!(CtrlSeg, fm_ce_se),
                offset_of!(CtrlSeg, imm),
            ]
        );
        assert_eq!(size_of::<EthSeg>(), size_of::<sys::mlx5_wqe_eth_seg>());
        assert_eq!(
            offset_of!(EthSeg, cs_flags),
            offset_of!(sys::mlx5_wqe_eth_seg, cs_flags)
        );
        assert_eq!(
            offset_of!(EthSeg, inline_hdr_sz),
            offset_of!(sys::mlx5_wqe_eth_seg, inline_hdr_sz)
        );
        assert_eq!(
            offset_of!(EthSeg, inline_hdr_start),
            offset_of!(sys::mlx5_wqe_eth_seg, inline_hdr_start)
        );
        assert_eq!(size_of::<DataSeg>(), size_of::<sys::mlx5_wqe_data_seg>());
        assert_eq!(
            offset_of!(DataSeg, lkey),
            offset_of!(sys::mlx5_wqe_data_seg, lkey)
        );
        assert_eq!(
            offset_of!(DataSeg, addr),
            offset_of!(sys::mlx5_wqe_data_seg, addr)
        );
        assert_eq!(size_of::<Cqe64>(), size_of::<sys::mlx5_cqe64>());
        assert_eq!(cqe_off::BYTE_CNT, offset_of!(sys::mlx5_cqe64, byte_cnt));
        assert_eq!(
            cqe_off::SOP_DROP_QPN,
            offset_of!(sys::mlx5_cqe64, sop_drop_qpn)
        );
        assert_eq!(
            cqe_off::WQE_COUNTER,
            offset_of!(sys::mlx5_cqe64, wqe_counter)
        );
        assert_eq!(cqe_off::OP_OWN, offset_of!(sys::mlx5_cqe64, op_own));
        assert_eq!(cqe_off::SYNDROME, offset_of!(sys::mlx5_err_cqe, syndrome));
        assert_eq!(
            cqe_off::VENDOR_ERR_SYND,
            offset_of!(sys::mlx5_err_cqe, vendor_err_synd)
        );
        // hds_ip_ext / l4_hdr_type_etc sit in an anonymous struct at the start of the union.
        let c = sys::mlx5_cqe64::default();
        let base = &c as *const _ as usize;
        // SAFETY: reading fields of a zeroed plain-data union is defined.
        let (h, l) = unsafe {
            (
                &c.__bindgen_anon_1.__bindgen_anon_1.hds_ip_ext as *const u8 as usize,
                &c.__bindgen_anon_1.__bindgen_anon_1.l4_hdr_type_etc as *const u8 as usize,
            )
        };
        assert_eq!(
            (h - base, l - base),
            (cqe_off::HDS_IP_EXT, cqe_off::L4_HDR_TYPE_ETC)
        );
    }

    #[test]
    fn constants_match_mlx5dv_h() {
        assert_eq!(MLX5_SEND_WQE_BB as u32, sys::MLX5_SEND_WQE_BB);
        assert_eq!(u32::from(MLX5_OPCODE_SEND), sys::MLX5_OPCODE_SEND);
        assert_eq!(
            u32::from(MLX5_WQE_CTRL_CQ_UPDATE),
            sys::MLX5_WQE_CTRL_CQ_UPDATE
        );
        assert_eq!(u32::from(MLX5_ETH_WQE_L3_CSUM), sys::MLX5_ETH_WQE_L3_CSUM);
        assert_eq!(u32::from(MLX5_ETH_WQE_L4_CSUM), sys::MLX5_ETH_WQE_L4_CSUM);
        assert_eq!(MLX5_INVALID_LKEY, sys::MLX5_INVALID_LKEY);
        assert_eq!(MLX5_INLINE_SEG, sys::MLX5_INLINE_SEG);
        assert_eq!(MLX5_RCV_DBR as u32, sys::MLX5_RCV_DBR);
        assert_eq!(MLX5_SND_DBR as u32, sys::MLX5_SND_DBR);
        assert_eq!(u32::from(MLX5_CQE_OWNER_MASK), sys::MLX5_CQE_OWNER_MASK);
        assert_eq!(u32::from(MLX5_CQE_REQ), sys::MLX5_CQE_REQ);
        assert_eq!(u32::from(MLX5_CQE_RESP_SEND), sys::MLX5_CQE_RESP_SEND);
        assert_eq!(u32::from(MLX5_CQE_REQ_ERR), sys::MLX5_CQE_REQ_ERR);
        assert_eq!(u32::from(MLX5_CQE_RESP_ERR), sys::MLX5_CQE_RESP_ERR);
        assert_eq!(u32::from(MLX5_CQE_INVALID), sys::MLX5_CQE_INVALID);
        assert_eq!(
            u32::from(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR),
            sys::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR
        );
        assert_eq!(
            u32::from(MLX5_CQE_SYNDROME_WR_FLUSH_ERR),
            sys::MLX5_CQE_SYNDROME_WR_FLUSH_ERR
        );
        assert_eq!(u32::from(MLX5_CQE_L3_OK), sys::MLX5_CQE_L3_OK);
        assert_eq!(u32::from(MLX5_CQE_L4_OK), sys::MLX5_CQE_L4_OK);
        assert_eq!(
            u32::from(MLX5_CQE_L3_HDR_TYPE_IPV4),
            sys::MLX5_CQE_L3_HDR_TYPE_IPV4
        );
    }
}
