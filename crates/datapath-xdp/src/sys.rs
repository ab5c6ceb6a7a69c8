//! The AF_XDP system calls: socket, UMEM registration, ring setup and mapping, bind, kicks and
//! statistics. Raw libc; every `unsafe` block is here or in `ring.rs`/`bpf.rs`.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use libc::{xdp_desc, xdp_mmap_offsets, xdp_ring_offset};

use crate::ring::{Consumer, Producer, RingIdx, RingMem};

/// How the socket moves packets between the device and the UMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// `XDP_COPY`: the kernel copies (works on every device, e.g. veth).
    Copy,
    /// `XDP_ZEROCOPY`: the NIC DMAs straight to/from the UMEM (drivers that support it).
    ZeroCopy,
}

/// Where and how to bind a socket.
#[derive(Clone, Copy, Debug)]
pub struct BindParams {
    /// UMEM frame size.
    pub frame: u32,
    /// Ring sizes.
    pub sizes: RingSizes,
    /// Interface index.
    pub ifindex: u32,
    /// Queue of that interface.
    pub queue: u32,
    /// Copy or zero-copy.
    pub mode: BindMode,
    /// Bind with `XDP_USE_SG` (multi-buffer frames).
    pub multi_buffer: bool,
}

/// Sizes of the four rings (powers of two).
#[derive(Clone, Copy, Debug)]
pub struct RingSizes {
    pub fill: u32,
    pub completion: u32,
    pub rx: u32,
    pub tx: u32,
}

/// `socket`/`setsockopt`/`getsockopt` return value check.
fn check(ret: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(with_context(io::Error::last_os_error(), what))
    } else {
        Ok(ret)
    }
}

/// `e` with the call that failed named in its message. Its kind is kept, and its errno can be
/// read back with [`errno_of`].
fn with_context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(
        e.kind(),
        OsError {
            what: what.to_owned(),
            os: e,
        },
    )
}

/// The errno of an error from [`check`] (or of a plain OS error).
fn errno_of(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<OsError>())
            .and_then(|o| o.os.raw_os_error())
    })
}

/// A failed system call: which, and the OS's error.
#[derive(Debug)]
struct OsError {
    what: String,
    os: io::Error,
}

impl std::fmt::Display for OsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.os)
    }
}

impl std::error::Error for OsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.os)
    }
}

/// Whether a bind with `XDP_USE_SG` failed because the kernel or driver has no multi-buffer
/// support (before 6.6: EINVAL; drivers without it: EOPNOTSUPP), so a bind without it is
/// worth trying.
fn sg_refused(e: &io::Error) -> bool {
    matches!(errno_of(e), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP))
}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, val: &T, what: &str) -> io::Result<()> {
    // SAFETY: `val` is a live `T` of `size_of::<T>()` bytes; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    check(r, what).map(drop)
}

fn getsockopt<T: Copy>(fd: RawFd, opt: libc::c_int, what: &str) -> io::Result<(T, usize)> {
    let mut v = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` has room for `len` bytes and `len` is a valid in/out length.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_XDP, opt, v.as_mut_ptr().cast(), &mut len) };
    check(r, what)?;
    // SAFETY: zero-initialised, and the kernel wrote at most `len` bytes of a plain-data struct
    // (all bit patterns are valid for these integer-only structs).
    Ok((unsafe { v.assume_init() }, len as usize))
}

/// The index of network interface `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::other("interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("interface {name}: {e}")));
    }
    Ok(i)
}

/// One shared ring mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+len` is a mapping we created and no ring referring to it outlives
        // the `Xsk` that owns both (rings are dropped before their mappings, see `Xsk`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn map_ring<T>(
    fd: RawFd,
    off: &xdp_ring_offset,
    size: u32,
    pgoff: u64,
    what: &str,
) -> io::Result<(Mapping, RingMem<T>)> {
    let len = off.desc as usize + size as usize * size_of::<T>();
    // SAFETY: a shared mapping of the socket's ring at the offset the kernel defines for it; the
    // result is checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("mmap {what} ring: {e}")));
    }
    let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
    let map = Mapping { ptr: base, len };
    let at = |o: u64| {
        // SAFETY: the kernel's offsets lie inside the `len`-byte mapping.
        unsafe { NonNull::new_unchecked(base.as_ptr().add(o as usize)) }
    };
    let idx = RingIdx::new(size).ok_or_else(|| io::Error::other("ring size not a power of 2"))?;
    // SAFETY: producer, consumer and flags are aligned u32s and `desc` is an array of `size`
    // entries of the ring's element type, all inside the mapping, which `map` keeps alive as
    // long as the ring (the caller stores both and drops the ring first).
    let mem = unsafe {
        RingMem::new(
            at(off.producer).cast(),
            at(off.consumer).cast(),
            Some(at(off.flags).cast()),
            at(off.desc).cast(),
            idx,
        )
    };
    Ok((map, mem))
}

/// An AF_XDP socket bound to one queue, with its UMEM registered and its four rings mapped.
pub struct XskSocket {
    // Field order is drop order: rings, then their mappings, then the socket.
    pub fill: Producer<u64>,
    pub completion: Consumer<u64>,
    pub rx: Consumer<xdp_desc>,
    pub tx: Producer<xdp_desc>,
    _maps: [Mapping; 4],
    fd: OwnedFd,
    zero_copy: bool,
    multi_buffer: bool,
}

impl XskSocket {
    /// Creates the socket, registers `umem_len` bytes at `umem` as its UMEM in frames of
    /// `p.frame` bytes, sets up and maps the rings and binds to `p.queue` of `p.ifindex`. The
    /// fill ring starts empty: post frames before expecting packets.
    ///
    /// # Safety
    /// `umem..umem+umem_len` must be a page-aligned mapping that stays mapped, and is not
    /// reused for anything else, until the socket is dropped (the kernel reads and writes the
    /// frames handed to it through the rings at any time until then).
    pub unsafe fn new(umem: *mut u8, umem_len: usize, p: &BindParams) -> io::Result<XskSocket> {
        let BindParams {
            frame,
            sizes,
            ifindex,
            queue,
            mode,
            multi_buffer,
        } = *p;
        // SAFETY: plain socket creation; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        let raw = check(raw, "socket(AF_XDP)")?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: frame,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(s, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        setsockopt(s, libc::XDP_UMEM_FILL_RING, &sizes.fill, "fill ring size")?;
        setsockopt(
            s,
            libc::XDP_UMEM_COMPLETION_RING,
            &sizes.completion,
            "completion ring size",
        )?;
        setsockopt(s, libc::XDP_RX_RING, &sizes.rx, "RX ring size")?;
        setsockopt(s, libc::XDP_TX_RING, &sizes.tx, "TX ring size")?;
        let (off, len) = getsockopt::<xdp_mmap_offsets>(s, libc::XDP_MMAP_OFFSETS, "offsets")?;
        if len != size_of::<xdp_mmap_offsets>() {
            return Err(io::Error::other(
                "kernel without ring flags in XDP_MMAP_OFFSETS (pre-5.4) is not supported",
            ));
        }
        let (fm, fill) = map_ring::<u64>(
            s,
            &off.fr,
            sizes.fill,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            "fill",
        )?;
        let (cm, comp) = map_ring::<u64>(
            s,
            &off.cr,
            sizes.completion,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "completion",
        )?;
        let (rm, rx) =
            map_ring::<xdp_desc>(s, &off.rx, sizes.rx, libc::XDP_PGOFF_RX_RING as u64, "RX")?;
        let (tm, tx) =
            map_ring::<xdp_desc>(s, &off.tx, sizes.tx, libc::XDP_PGOFF_TX_RING as u64, "TX")?;
        let base = match mode {
            BindMode::Copy => libc::XDP_COPY,
            BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        let bind = |flags: u16| -> io::Result<()> {
            // SAFETY: sockaddr_xdp is plain data; all-zero is a valid value.
            let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
            sa.sxdp_family = libc::AF_XDP as u16;
            sa.sxdp_flags = flags;
            sa.sxdp_ifindex = ifindex;
            sa.sxdp_queue_id = queue;
            // SAFETY: `sa` is a valid sockaddr_xdp of the length passed.
            let r = unsafe {
                libc::bind(
                    s,
                    (&sa as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            check(r, "bind(AF_XDP)").map(drop)
        };
        // The kernel frees the queue's buffer pool of a closed AF_XDP socket in deferred work:
        // a socket bound to a queue just after another one on it closed (the next server or
        // client of a bench), or to a veth just created, can see EBUSY for a moment. Retried for up
        // to five seconds.
        let bind = |flags: u16| -> io::Result<()> {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                match bind(flags) {
                    Err(e)
                        if errno_of(&e) == Some(libc::EBUSY)
                            && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    r => return r,
                }
            }
        };
        // Kernels before 6.6 (and drivers without multi-buffer support) refuse XDP_USE_SG
        // with EINVAL/EOPNOTSUPP: fall back to single-buffer frames.
        let multi_buffer = if multi_buffer {
            match bind(base | libc::XDP_USE_SG) {
                Ok(()) => true,
                Err(e) if sg_refused(&e) => {
                    bind(base)?;
                    false
                }
                Err(e) => return Err(e),
            }
        } else {
            bind(base)?;
            false
        };
        let zero_copy = getsockopt::<libc::xdp_options>(s, libc::XDP_OPTIONS, "XDP_OPTIONS")
            .map(|(o, _)| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
            .unwrap_or(false);
        Ok(XskSocket {
            fill: Producer::new(fill),
            completion: Consumer::new(comp),
            rx: Consumer::new(rx),
            tx: Producer::new(tx),
            _maps: [fm, cm, rm, tm],
            fd,
            zero_copy,
            multi_buffer,
        })
    }

    /// The socket descriptor (to put in the XSK map).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Whether the kernel runs this socket in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether the socket is bound with `XDP_USE_SG` (frames of several descriptors).
    pub fn is_multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// Asks the kernel to process the TX ring (copy mode transmits only inside this call).
    /// "Try again later" answers are not errors: the descriptors stay queued.
    pub fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length send with no buffer and no address is the documented AF_XDP
        // TX wake-up.
        let r = unsafe {
            libc::sendto(
                self.fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN) => {
                Ok(())
            }
            _ => Err(e),
        }
    }

    /// Wakes the kernel's receive path (needed only with `XDP_USE_NEED_WAKEUP`, harmless
    /// otherwise).
    pub fn kick_rx(&self) {
        // SAFETY: a zero-length non-blocking receive is the documented AF_XDP RX wake-up.
        unsafe {
            libc::recvfrom(
                self.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// The kernel's per-socket counters.
    pub fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        getsockopt::<libc::xdp_statistics>(self.fd(), libc::XDP_STATISTICS, "XDP_STATISTICS")
            .map(|(s, _)| s)
    }
}

fn ifreq_for(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    for (d, &s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl_ifreq(req: &mut libc::ifreq, op: libc::Ioctl, what: &str) -> io::Result<()> {
    // SAFETY: plain socket creation; checked.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let s = check(s, "socket(AF_INET)")?;
    // SAFETY: `s` is a fresh descriptor we own (closed when `fd` drops).
    let fd = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: `req` is a valid ifreq for this request, which reads the name and writes the
    // union.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), op, req as *mut libc::ifreq) };
    check(r, what).map(drop)
}

/// The MAC address of interface `name` (calling thread's network namespace).
pub fn mac_address(name: &str) -> io::Result<[u8; 6]> {
    let mut req = ifreq_for(name)?;
    ioctl_ifreq(&mut req, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR")?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(&sa.sa_data[..6]) {
        *m = b as u8;
    }
    Ok(mac)
}

/// The MTU of interface `name` (calling thread's network namespace).
pub fn mtu(name: &str) -> io::Result<usize> {
    let mut req = ifreq_for(name)?;
    ioctl_ifreq(&mut req, libc::SIOCGIFMTU, "SIOCGIFMTU")?;
    // SAFETY: SIOCGIFMTU filled the mtu member of the union.
    let m = unsafe { req.ifr_ifru.ifru_mtu };
    usize::try_from(m).map_err(|_| io::Error::other("negative MTU"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_calls_errno_survives_its_context() {
        let e = with_context(io::Error::from_raw_os_error(libc::EINVAL), "bind(AF_XDP)");
        assert_eq!(errno_of(&e), Some(libc::EINVAL));
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().starts_with("bind(AF_XDP): "), "{e}");
        // The multi-buffer fallback is taken for what old kernels and drivers answer, and
        // only for that.
        assert!(sg_refused(&e));
        let unsupported = with_context(io::Error::from_raw_os_error(libc::EOPNOTSUPP), "bind");
        assert!(sg_refused(&unsupported));
        let busy = with_context(io::Error::from_raw_os_error(libc::EBUSY), "bind");
        assert!(!sg_refused(&busy));
        assert_eq!(errno_of(&busy), Some(libc::EBUSY));
        assert!(!sg_refused(&io::Error::other("no errno")));
        assert_eq!(errno_of(&io::Error::other("no errno")), None);
    }
}
