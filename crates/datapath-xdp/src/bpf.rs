//! Loading and attaching the XDP program (`bpf/cf_xdp.c`, compiled by `build.rs`) with libbpf.
//!
//! Only the handful of libbpf calls we need are declared here; the object file is embedded in
//! the crate, so nothing is read from disk at run time.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cf_xdp.o"));

#[repr(C)]
struct BpfObject {
    _opaque: [u8; 0],
}

#[repr(C)]
struct BpfProgram {
    _opaque: [u8; 0],
}

#[link(name = "bpf")]
extern "C" {
    fn bpf_object__open_mem(buf: *const c_void, size: usize, opts: *const c_void)
        -> *mut BpfObject;
    fn bpf_object__load(obj: *mut BpfObject) -> c_int;
    fn bpf_object__close(obj: *mut BpfObject);
    fn bpf_object__find_program_by_name(
        obj: *const BpfObject,
        name: *const c_char,
    ) -> *mut BpfProgram;
    fn bpf_program__fd(prog: *const BpfProgram) -> c_int;
    fn bpf_object__find_map_fd_by_name(obj: *const BpfObject, name: *const c_char) -> c_int;
    fn bpf_xdp_attach(ifindex: c_int, prog_fd: c_int, flags: u32, opts: *const c_void) -> c_int;
    fn bpf_xdp_detach(ifindex: c_int, flags: u32, opts: *const c_void) -> c_int;
    fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    fn bpf_map_lookup_elem(fd: c_int, key: *const c_void, value: *mut c_void) -> c_int;
}

const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

const CFG_PORT: u32 = 0;
const CFG_ARP_TO_STACK: u32 = 1;
const CFG_PORTS: u32 = 2;

/// Where the program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (native XDP; veth and most NIC drivers support it).
    Native,
    /// On the generic skb path (every device; slower, no multi-buffer on old kernels).
    Generic,
}

/// Which program of the object to attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// `cf_xdp_redirect`: our UDP port (and optionally ARP) to the AF_XDP socket.
    Redirect,
    /// `cf_xdp_pass`: passes everything (for the far end of a veth pair).
    Pass,
}

impl Program {
    fn name(self) -> &'static CStr {
        match self {
            Program::Redirect => c"cf_xdp_redirect",
            Program::Pass => c"cf_xdp_pass",
        }
    }
}

/// Counters kept by the redirect program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramStats {
    /// Frames to our UDP port redirected to the socket.
    pub redirected: u64,
    /// ARP frames redirected to the socket.
    pub arp: u64,
    /// Frames passed to the kernel.
    pub passed: u64,
    /// Frames for one server core's port that arrived on another core's queue (dropped; see
    /// [`XdpProgram::set_ports`]).
    pub misteered: u64,
}

/// `redirected=… arp=… passed=… misteered=…`: how the servers print the program's counters
/// when they stop, and what [`FromStr`](std::str::FromStr) reads back.
impl std::fmt::Display for ProgramStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "redirected={} arp={} passed={} misteered={}",
            self.redirected, self.arp, self.passed, self.misteered
        )
    }
}

/// Parses the [`Display`](std::fmt::Display) form (e.g. from a server's output); every
/// counter must be there.
impl std::str::FromStr for ProgramStats {
    type Err = String;

    fn from_str(s: &str) -> Result<ProgramStats, String> {
        let mut got = [None; 4];
        for kv in s.split_whitespace() {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("XDP program counters {s:?}: `{kv}` is not NAME=N"))?;
            let slot = match k {
                "redirected" => 0,
                "arp" => 1,
                "passed" => 2,
                "misteered" => 3,
                _ => continue,
            };
            let n = v
                .parse::<u64>()
                .map_err(|e| format!("XDP program counters {s:?}: {k}={v:?}: {e}"))?;
            got[slot] = Some(n);
        }
        let [Some(redirected), Some(arp), Some(passed), Some(misteered)] = got else {
            return Err(format!(
                "XDP program counters {s:?}: expected redirected=, arp=, passed= and misteered="
            ));
        };
        Ok(ProgramStats {
            redirected,
            arp,
            passed,
            misteered,
        })
    }
}

fn neg_errno(r: c_int, what: &str) -> io::Result<c_int> {
    if r < 0 {
        let e = io::Error::from_raw_os_error(-r);
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(r)
    }
}

/// A loaded program attached to one interface; detached and unloaded on drop.
pub struct XdpProgram {
    obj: NonNull<BpfObject>,
    ifindex: u32,
    flags: u32,
    xsks: RawFd,
    config: RawFd,
    stats: RawFd,
}

impl XdpProgram {
    /// Loads the object and attaches `which` to `ifindex` (in the calling thread's network
    /// namespace). Fails if the interface already has an XDP program.
    pub fn attach(ifindex: u32, which: Program, mode: AttachMode) -> io::Result<XdpProgram> {
        // SAFETY: `OBJECT` is a static byte slice; libbpf copies what it needs. NULL opts means
        // defaults. NULL return means failure with errno set.
        let obj =
            unsafe { bpf_object__open_mem(OBJECT.as_ptr().cast(), OBJECT.len(), std::ptr::null()) };
        let obj = NonNull::new(obj).ok_or_else(|| {
            let e = io::Error::last_os_error();
            io::Error::new(e.kind(), format!("opening the embedded BPF object: {e}"))
        })?;
        // From here on `guard` closes the object on every error path.
        let mut guard = XdpProgram {
            obj,
            ifindex: 0,
            flags: 0,
            xsks: -1,
            config: -1,
            stats: -1,
        };
        // SAFETY: `obj` is a valid, not yet loaded object.
        let r = unsafe { bpf_object__load(obj.as_ptr()) };
        neg_errno(r, "loading the XDP program (need root / CAP_BPF)")?;
        let map = |name: &CStr| -> io::Result<RawFd> {
            // SAFETY: `obj` is loaded; `name` is NUL-terminated.
            let fd = unsafe { bpf_object__find_map_fd_by_name(obj.as_ptr(), name.as_ptr()) };
            neg_errno(fd, "finding a map of the XDP program")
        };
        guard.xsks = map(c"cf_xsks")?;
        guard.config = map(c"cf_config")?;
        guard.stats = map(c"cf_stats")?;
        // SAFETY: as above.
        let prog = unsafe { bpf_object__find_program_by_name(obj.as_ptr(), which.name().as_ptr()) };
        if prog.is_null() {
            return Err(io::Error::other("the XDP object lacks its program"));
        }
        // SAFETY: `prog` belongs to the loaded object.
        let prog_fd = neg_errno(unsafe { bpf_program__fd(prog) }, "program fd")?;
        let flags = XDP_FLAGS_UPDATE_IF_NOEXIST
            | match mode {
                AttachMode::Native => XDP_FLAGS_DRV_MODE,
                AttachMode::Generic => XDP_FLAGS_SKB_MODE,
            };
        // SAFETY: plain netlink request; NULL opts means defaults.
        let r = unsafe { bpf_xdp_attach(ifindex as c_int, prog_fd, flags, std::ptr::null()) };
        neg_errno(r, "attaching the XDP program")?;
        guard.ifindex = ifindex;
        guard.flags = flags & !XDP_FLAGS_UPDATE_IF_NOEXIST;
        Ok(guard)
    }

    fn update(&self, map: RawFd, key: u32, value: &[u8], what: &str) -> io::Result<()> {
        update(map, key, value, what)
    }

    /// The program of a server with `cores` cores on interface `ifname` (native mode): port
    /// `base + i` redirected to queue *i*'s socket ([`Self::set_ports`]), ARP to the sockets
    /// (each core's stack answers it). Each core then opens its `XdpDatapath` with a
    /// [`Self::share`] handle, `queue: i` and port `base + i`; keep this value until every core
    /// has stopped (dropping it detaches the program).
    pub fn for_cores(ifname: &str, base: u16, cores: u16) -> io::Result<XdpProgram> {
        let ifindex = crate::sys::ifindex(ifname)
            .map_err(|e| io::Error::new(e.kind(), format!("interface {ifname}: {e}")))?;
        let prog = XdpProgram::attach(ifindex, Program::Redirect, AttachMode::Native)?;
        let setup = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("configuring the XDP program on {ifname}: {e}"),
            )
        };
        prog.set_arp_to_stack(true).map_err(setup)?;
        prog.set_ports(base, cores).map_err(setup)?;
        Ok(prog)
    }

    /// Redirects UDP datagrams to `port` (0 redirects none).
    pub fn set_port(&self, port: u16) -> io::Result<()> {
        self.set_ports(port, 1)
    }

    /// Redirects UDP datagrams to the `cores` ports `base..base + cores`, port `base + i` to
    /// the socket of queue `i` (one server core per queue, `docs/cores.md`). A datagram for
    /// port `base + i` arriving on another queue is dropped and counted
    /// ([`ProgramStats::misteered`]).
    pub fn set_ports(&self, base: u16, cores: u16) -> io::Result<()> {
        if usize::from(base) + usize::from(cores.max(1)) > 65536 {
            return Err(io::Error::other(format!(
                "{cores} ports from {base} run past 65535"
            )));
        }
        self.update(
            self.config,
            CFG_PORTS,
            &u32::from(cores).to_ne_bytes(),
            "setting the number of ports",
        )?;
        self.update(
            self.config,
            CFG_PORT,
            &u32::from(base).to_ne_bytes(),
            "setting the port",
        )
    }

    /// Whether ARP frames go to the socket (our stack answers ARP) or to the kernel.
    pub fn set_arp_to_stack(&self, on: bool) -> io::Result<()> {
        self.update(
            self.config,
            CFG_ARP_TO_STACK,
            &u32::from(on).to_ne_bytes(),
            "setting the ARP policy",
        )
    }

    /// Steers queue `queue`'s traffic to the AF_XDP socket `fd`.
    pub fn register_socket(&self, queue: u32, fd: RawFd) -> io::Result<()> {
        register(self.xsks, queue, fd)
    }

    /// The program's counters.
    pub fn stats(&self) -> io::Result<ProgramStats> {
        read_stats(self.stats)
    }

    /// A handle other threads use to register their queue's socket with this program and read
    /// its counters (one datapath per core, each on its own thread; the program stays with
    /// this object, which must outlive them).
    pub fn share(&self) -> io::Result<SharedProgram> {
        let dup = |fd: RawFd| -> io::Result<Arc<OwnedFd>> {
            // SAFETY: `fd` is a map fd this object keeps open for its whole life; borrowing it
            // for the duration of the dup is sound.
            let b = unsafe { BorrowedFd::borrow_raw(fd) };
            Ok(Arc::new(b.try_clone_to_owned()?))
        };
        Ok(SharedProgram {
            xsks: dup(self.xsks)?,
            stats: dup(self.stats)?,
        })
    }
}

/// The part of an attached [`XdpProgram`] a datapath on another thread needs: its socket map
/// (to register its queue's socket) and its counters. Cloning is cheap.
#[derive(Clone, Debug)]
pub struct SharedProgram {
    xsks: Arc<OwnedFd>,
    stats: Arc<OwnedFd>,
}

impl SharedProgram {
    /// Steers queue `queue`'s traffic to the AF_XDP socket `fd`.
    pub fn register_socket(&self, queue: u32, fd: RawFd) -> io::Result<()> {
        register(self.xsks.as_raw_fd(), queue, fd)
    }

    /// The program's counters.
    pub fn stats(&self) -> io::Result<ProgramStats> {
        read_stats(self.stats.as_raw_fd())
    }
}

fn update(map: RawFd, key: u32, value: &[u8], what: &str) -> io::Result<()> {
    // SAFETY: key and value point at live data of the map's key and value sizes (u32 keys;
    // callers pass values of the declared size).
    let r =
        unsafe { bpf_map_update_elem(map, (&key as *const u32).cast(), value.as_ptr().cast(), 0) };
    neg_errno(r, what).map(drop)
}

fn register(xsks: RawFd, queue: u32, fd: RawFd) -> io::Result<()> {
    update(
        xsks,
        queue,
        &(fd as u32).to_ne_bytes(),
        "adding the socket to the XSK map",
    )
}

fn read_stats(stats: RawFd) -> io::Result<ProgramStats> {
    let get = |k: u32| -> io::Result<u64> {
        let mut v = 0u64;
        // SAFETY: u32 key and u64 value match the map's declaration.
        let r = unsafe {
            bpf_map_lookup_elem(
                stats,
                (&k as *const u32).cast(),
                (&mut v as *mut u64).cast(),
            )
        };
        neg_errno(r, "reading XDP counters").map(|_| v)
    };
    Ok(ProgramStats {
        redirected: get(0)?,
        arp: get(1)?,
        passed: get(2)?,
        misteered: get(3)?,
    })
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        if self.ifindex != 0 {
            // SAFETY: plain netlink request. Failure (interface already gone) leaves nothing
            // to clean up.
            unsafe { bpf_xdp_detach(self.ifindex as c_int, self.flags, std::ptr::null()) };
        }
        // SAFETY: the object came from `bpf_object__open_mem` and is closed exactly once; map
        // fds obtained from it are not used after this.
        unsafe { bpf_object__close(self.obj.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::ProgramStats;

    #[test]
    fn program_counters_print_and_parse_back() {
        let p = ProgramStats {
            redirected: 12,
            arp: 1,
            passed: 3,
            misteered: 4,
        };
        assert_eq!(p.to_string(), "redirected=12 arp=1 passed=3 misteered=4");
        assert_eq!(p.to_string().parse::<ProgramStats>(), Ok(p));
        let e = "redirected=1 arp=2 passed=3"
            .parse::<ProgramStats>()
            .unwrap_err();
        assert!(e.contains("misteered="), "{e}");
        let e = "redirected=x arp=2 passed=3 misteered=0"
            .parse::<ProgramStats>()
            .unwrap_err();
        assert!(e.contains("redirected=\"x\""), "{e}");
    }
}
