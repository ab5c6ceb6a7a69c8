//! The EAL (initialised once per process), device hotplug, and ring-backed port pairs.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_uint};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use super::sys;

/// A DPDK call failed: which call and DPDK's error number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkError {
    /// What was being done.
    pub what: String,
    /// The positive errno (`rte_errno` or the negated return value).
    pub errno: i32,
}

impl DpdkError {
    pub(crate) fn new(what: impl Into<String>, errno: i32) -> DpdkError {
        DpdkError {
            what: what.into(),
            errno: errno.abs(),
        }
    }

    /// From `rte_errno` (for calls returning -1 or NULL).
    pub(crate) fn last(what: impl Into<String>) -> DpdkError {
        // SAFETY: reads the calling thread's rte_errno; no arguments.
        let e = unsafe { sys::cf_errno() };
        DpdkError::new(what, e)
    }
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
        // string for any errno value.
        let msg = unsafe { CStr::from_ptr(sys::rte_strerror(self.errno)) };
        write!(
            f,
            "{}: {} (errno {})",
            self.what,
            msg.to_string_lossy(),
            self.errno
        )
    }
}

impl std::error::Error for DpdkError {}

impl From<DpdkError> for std::io::Error {
    fn from(e: DpdkError) -> Self {
        let kind = std::io::Error::from_raw_os_error(e.errno).kind();
        std::io::Error::new(kind, e.to_string())
    }
}

static EAL: OnceLock<Result<Vec<String>, DpdkError>> = OnceLock::new();

/// The NUL-terminated argument strings given to `rte_eal_init`.
static ARGV: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

/// Initialises the EAL with `args` (program name first, see
/// [`EalOptions::to_args`](crate::eal_args::EalOptions::to_args)). The EAL can be initialised
/// only once per process: later calls return the first call's outcome, and the arguments it was
/// started with, whatever `args` they pass. The calling thread becomes the main lcore.
pub fn init(args: &[String]) -> Result<&'static [String], DpdkError> {
    let r = EAL.get_or_init(|| {
        if args.iter().any(|a| a.contains('\0')) {
            return Err(DpdkError::new(
                "EAL argument contains a NUL byte",
                libc::EINVAL,
            ));
        }
        // The EAL keeps pointers into the argument strings (and getopt may permute the
        // array), so the strings live in a static for the rest of the process.
        let mut strings = ARGV.lock().unwrap_or_else(|e| e.into_inner());
        *strings = args
            .iter()
            .map(|a| {
                let mut b = a.clone().into_bytes();
                b.push(0);
                b.into_boxed_slice()
            })
            .collect();
        let mut argv: Vec<*mut c_char> = strings
            .iter_mut()
            .map(|b| b.as_mut_ptr().cast::<c_char>())
            .collect();
        let argc = argv.len() as c_int;
        // SAFETY: argv holds argc NUL-terminated strings that stay allocated (in `ARGV`) and
        // are not touched by Rust again; the array itself is only used during the call.
        let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        drop(strings);
        if ret < 0 {
            return Err(DpdkError::last(format!("rte_eal_init({})", args.join(" "))));
        }
        let no_files = args
            .iter()
            .any(|a| a == "--no-shconf" || a == "--in-memory");
        if no_files {
            // Without shared configuration (and so without IPC) and telemetry, the EAL's runtime
            // directory stays empty; remove it now so a run leaves nothing behind. It is left
            // alone if something did create files in it.
            let _ = std::fs::remove_dir(runtime_dir());
        }
        Ok(args.to_vec())
    });
    match r {
        Ok(a) => Ok(a.as_slice()),
        Err(e) => Err(e.clone()),
    }
}

/// The EAL's runtime directory for this process (`/var/run/dpdk/<file-prefix>` for root).
/// With `--no-shconf`/`--in-memory`, [`init`] removes it again (the parent, shared by every
/// DPDK process, stays).
pub fn runtime_dir() -> std::path::PathBuf {
    // SAFETY: returns a pointer to the EAL's static NUL-terminated path string (empty before
    // init).
    let dir = unsafe { CStr::from_ptr(sys::rte_eal_get_runtime_dir()) };
    std::path::PathBuf::from(dir.to_string_lossy().into_owned())
}

/// Whether [`init`] has succeeded in this process.
pub fn is_initialized() -> bool {
    matches!(EAL.get(), Some(Ok(_)))
}

fn require_eal(what: &str) -> Result<(), DpdkError> {
    if is_initialized() {
        Ok(())
    } else {
        Err(DpdkError::new(
            format!("{what}: the EAL is not initialised (call eal::init first)"),
            libc::ENODEV,
        ))
    }
}

/// Whether IOVAs are virtual addresses (`--iova-mode=va`, vfio with an IOMMU, or virtual
/// devices only).
pub fn iova_is_va() -> bool {
    // SAFETY: no arguments; valid after EAL init (returns RTE_IOVA_DC before).
    unsafe { sys::rte_eal_iova_mode() == sys::RTE_IOVA_VA }
}

/// Probes a virtual device at run time (`--vdev` after start), e.g.
/// `net_af_packet7,iface=veth-a`. The device is created in the calling thread's network
/// namespace. Returns its port id.
pub fn add_vdev(devargs: &str) -> Result<u16, DpdkError> {
    require_eal("add_vdev")?;
    let (name, args) = devargs.split_once(',').unwrap_or((devargs, ""));
    let bus = CString::new("vdev").expect("no NUL");
    let cname = CString::new(name).map_err(|_| DpdkError::new("vdev name", libc::EINVAL))?;
    let cargs = CString::new(args).map_err(|_| DpdkError::new("vdev args", libc::EINVAL))?;
    // SAFETY: three valid NUL-terminated strings, only read during the call.
    let ret = unsafe { sys::rte_eal_hotplug_add(bus.as_ptr(), cname.as_ptr(), cargs.as_ptr()) };
    if ret < 0 {
        return Err(DpdkError::new(format!("probing vdev {devargs}"), ret));
    }
    port_by_name(name)
        .ok_or_else(|| DpdkError::new(format!("vdev {name} created no port"), libc::ENODEV))
}

/// Removes a virtual device added with [`add_vdev`] (its port must be closed).
pub fn remove_vdev(name: &str) -> Result<(), DpdkError> {
    require_eal("remove_vdev")?;
    let bus = CString::new("vdev").expect("no NUL");
    let cname = CString::new(name).map_err(|_| DpdkError::new("vdev name", libc::EINVAL))?;
    // SAFETY: valid NUL-terminated strings, only read during the call.
    let ret = unsafe { sys::rte_eal_hotplug_remove(bus.as_ptr(), cname.as_ptr()) };
    if ret < 0 {
        return Err(DpdkError::new(format!("removing vdev {name}"), ret));
    }
    Ok(())
}

/// The port id of the device called `name` (a PCI address like `0000:3b:00.0`, or a vdev
/// name).
pub fn port_by_name(name: &str) -> Option<u16> {
    if !is_initialized() {
        return None;
    }
    let c = CString::new(name).ok()?;
    let mut port = 0u16;
    // SAFETY: `c` is NUL-terminated and `port` a valid out-pointer for the call.
    let ret = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut port) };
    (ret == 0).then_some(port)
}

static RING_SEQ: AtomicU32 = AtomicU32::new(0);

/// Two DPDK rings joined as a cable between two `net_ring` ports: what one port transmits the
/// other receives (the mbufs themselves move, so multi-segment external-buffer chains arrive
/// as they were sent). Shared by both ends' datapaths; dropped with the last one.
///
/// With several queues ([`with_queues`](Self::with_queues)) there is one ring per queue and
/// direction: what port a sends on TX queue `q` arrives on port b's RX queue `q`, and back.
/// The sender picks the queue, so this exercises one queue pair per core but steers nothing
/// (`net_ring` has no `rte_flow` and no RSS).
pub struct RingLink {
    /// Rings `0..queues`: into port a (its RX queues); `queues..2 * queues`: into port b.
    rings: Vec<NonNull<sys::rte_ring>>,
    ports: [u16; 2],
    queues: usize,
}

// SAFETY: the link holds DPDK rings and port ids. Rings are DPDK objects usable from any
// thread; each is single-producer/single-consumer, and the link's own accesses (draining a
// port's TX rings when that port's datapath for the queue goes away, freeing in Drop) happen
// when that side no longer transmits on it, as documented on `drain_tx_of`.
unsafe impl Send for RingLink {}
// SAFETY: as above; `&RingLink` offers only `ports`, `queues` and the drains.
unsafe impl Sync for RingLink {}

impl RingLink {
    /// Creates the rings and both ports (`<name>_a`, `<name>_b`, made unique per process).
    pub fn new(name: &str, size: u32) -> Result<RingLink, DpdkError> {
        Self::with_queues(name, size, 1)
    }

    /// As [`new`](Self::new), with `queues` RX/TX queue pairs on each port.
    pub fn with_queues(name: &str, size: u32, queues: usize) -> Result<RingLink, DpdkError> {
        require_eal("RingLink::new")?;
        if queues == 0 || queues > 16 {
            return Err(DpdkError::new(
                format!("a ring link with {queues} queues (net_ring takes 1 to 16)"),
                libc::EINVAL,
            ));
        }
        let seq = RING_SEQ.fetch_add(1, Ordering::Relaxed);
        let mut rings = Vec::with_capacity(2 * queues);
        for i in 0..2 * queues {
            let rn = CString::new(format!("cfr{seq}_{i}"))
                .map_err(|_| DpdkError::new("ring name", libc::EINVAL))?;
            // SAFETY: valid name; the ring is freed in Drop (or below on failure).
            let r = unsafe {
                sys::rte_ring_create(
                    rn.as_ptr(),
                    size.next_power_of_two(),
                    sys::rte_socket_id() as c_int,
                    (sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ) as c_uint,
                )
            };
            match NonNull::new(r) {
                Some(r) => rings.push(r),
                None => {
                    let e = DpdkError::last(format!("rte_ring_create({size})"));
                    for r in rings {
                        // SAFETY: created above, used by nothing yet.
                        unsafe { sys::rte_ring_free(r.as_ptr()) };
                    }
                    return Err(e);
                }
            }
        }
        let mut link = RingLink {
            rings,
            ports: [u16::MAX; 2],
            queues,
        };
        for i in 0..2 {
            let side = if i == 0 { 'a' } else { 'b' };
            let pn = CString::new(format!("{name}{seq}_{side}"))
                .map_err(|_| DpdkError::new("port name", libc::EINVAL))?;
            // Port a receives from rings 0..q and sends into rings q..2q; port b the other
            // way round.
            let (rx, tx) = link.rings.split_at(queues);
            let (rx, tx) = if i == 0 { (rx, tx) } else { (tx, rx) };
            let rx: Vec<*mut sys::rte_ring> = rx.iter().map(|r| r.as_ptr()).collect();
            let tx: Vec<*mut sys::rte_ring> = tx.iter().map(|r| r.as_ptr()).collect();
            // SAFETY: arrays of `queues` live rings; the rings outlive the ports (Drop closes
            // both ports before freeing them).
            let p = unsafe {
                sys::rte_eth_from_rings(
                    pn.as_ptr(),
                    rx.as_ptr(),
                    queues as c_uint,
                    tx.as_ptr(),
                    queues as c_uint,
                    sys::rte_socket_id() as c_uint,
                )
            };
            if p < 0 {
                return Err(DpdkError::last(format!("rte_eth_from_rings({name})")));
            }
            link.ports[i] = p as u16;
        }
        Ok(link)
    }

    /// Queue pairs per port.
    pub fn queues(&self) -> usize {
        self.queues
    }

    /// The two ports.
    pub fn ports(&self) -> [u16; 2] {
        self.ports
    }

    /// Frees every mbuf waiting in the ring `port` transmits into (the frames are lost, as on a
    /// cable that is unplugged). Called when that port's datapath goes away, so none of its
    /// mbufs outlives its pools.
    pub(crate) fn drain_tx_of(&self, port: u16) -> u32 {
        (0..self.queues).map(|q| self.drain_tx_queue(port, q)).sum()
    }

    /// Frees every mbuf waiting in the ring TX queue `queue` of `port` transmits into (when
    /// that queue's datapath goes away; the peer must not be reading that ring meanwhile).
    pub(crate) fn drain_tx_queue(&self, port: u16, queue: usize) -> u32 {
        if queue >= self.queues {
            return 0;
        }
        // Port a transmits into rings q..2q, port b into 0..q.
        let base = if self.ports[1] == port {
            0
        } else {
            self.queues
        };
        // SAFETY: the ring is live; mbufs in it are owned by the ring and freed exactly once.
        unsafe { sys::cf_ring_drain(self.rings[base + queue].as_ptr()) }
    }
}

impl Drop for RingLink {
    fn drop(&mut self) {
        for p in self.ports.into_iter().filter(|&p| p != u16::MAX) {
            // SAFETY: the ports were created by this link; their datapaths (which hold the
            // link) are gone, so nothing polls them. Stop is a no-op for a stopped port.
            unsafe {
                sys::rte_eth_dev_stop(p);
                sys::rte_eth_dev_close(p);
            }
        }
        for r in &self.rings {
            // SAFETY: both ports are closed; no one enqueues any more.
            unsafe {
                sys::cf_ring_drain(r.as_ptr());
                sys::rte_ring_free(r.as_ptr());
            }
        }
    }
}

impl fmt::Debug for RingLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingLink")
            .field("ports", &self.ports)
            .finish()
    }
}
