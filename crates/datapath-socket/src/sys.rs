//! The only `unsafe` code of the crate: `sendmmsg`, `recvmmsg` and `setsockopt` through libc.
//!
//! Every function here is safe to call: iovecs are built from live [`RcBuf`]s / [`RcBufMut`]s
//! borrowed for the duration of the call, and every pointer handed to the kernel points into a
//! vector that is fully built (never reallocated) before the pointers are taken.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};

use cornflakes_mem::{RcBuf, RcBufMut};

/// `UDP_SEGMENT` from `<linux/udp.h>` (not in the libc crate): the GSO segment size.
const UDP_SEGMENT: libc::c_int = 103;
/// Most segments one GSO send may carry (`UDP_MAX_SEGMENTS` in the kernel).
pub(crate) const MAX_GSO_SEGMENTS: usize = 64;
/// Most iovecs per message (`UIO_MAXIOV`).
pub(crate) const MAX_IOV: usize = 1024;

/// One datagram of a send batch: the buffers `iov` of the batch, sent to `addr`, cut by the
/// kernel into `gso`-byte datagrams when `gso` is non-zero.
#[derive(Clone, Debug)]
pub(crate) struct Datagram {
    pub addr: SocketAddrV4,
    pub iov: Range<usize>,
    pub gso: u16,
}

/// Space for one `cmsghdr` carrying a `u16`, 8-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct CmsgBuf([u8; 32]);

/// Reusable arrays for `sendmmsg` (kept between calls so the hot path does not allocate).
#[derive(Default)]
pub(crate) struct SendScratch {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_in>,
    cmsgs: Vec<CmsgBuf>,
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// Sends `dgrams` (each an iovec list over `bufs`) with one `sendmmsg`. Returns how many
/// datagrams the kernel took (at least 1 on success); the kernel has copied their bytes.
pub(crate) fn send_batch(
    fd: BorrowedFd<'_>,
    dgrams: &[Datagram],
    bufs: &[RcBuf],
    s: &mut SendScratch,
) -> io::Result<usize> {
    s.msgs.clear();
    s.iovs.clear();
    s.addrs.clear();
    s.cmsgs.clear();
    for d in dgrams {
        for b in &bufs[d.iov.clone()] {
            s.iovs.push(libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            });
        }
        s.addrs.push(sockaddr(d.addr));
        let mut c = CmsgBuf([0; 32]);
        if d.gso != 0 {
            // cmsghdr { len, level, type } then the u16 payload, as CMSG_LEN(2) describes.
            // SAFETY: CMSG_LEN is a pure size computation.
            let len = unsafe { libc::CMSG_LEN(size_of::<u16>() as u32) } as usize;
            let hdr = libc::cmsghdr {
                cmsg_len: len as _,
                cmsg_level: libc::SOL_UDP,
                cmsg_type: UDP_SEGMENT,
            };
            let hs = size_of::<libc::cmsghdr>();
            // SAFETY: `cmsghdr` is plain data of `hs` bytes (≤ 16 < 32); we copy its bytes
            // into the aligned buffer.
            let raw = unsafe {
                std::slice::from_raw_parts(&hdr as *const libc::cmsghdr as *const u8, hs)
            };
            c.0[..hs].copy_from_slice(raw);
            c.0[hs..hs + 2].copy_from_slice(&d.gso.to_ne_bytes());
        }
        s.cmsgs.push(c);
    }
    // All vectors are complete: pointers into them stay valid until they are cleared. Base
    // pointers are taken once (`Vec::as_mut_ptr` creates no intermediate reference).
    let iov_base = s.iovs.as_mut_ptr();
    let addr_base = s.addrs.as_mut_ptr();
    let cmsg_base = s.cmsgs.as_mut_ptr();
    let mut iov_at = 0;
    for (i, d) in dgrams.iter().enumerate() {
        let n = d.iov.len();
        // SAFETY: an all-zero `mmsghdr` is valid (null pointers, zero lengths).
        let mut m: libc::mmsghdr = unsafe { zeroed() };
        m.msg_hdr.msg_name = addr_base.wrapping_add(i) as *mut libc::c_void;
        m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        m.msg_hdr.msg_iov = iov_base.wrapping_add(iov_at);
        m.msg_hdr.msg_iovlen = n as _;
        if d.gso != 0 {
            m.msg_hdr.msg_control = cmsg_base.wrapping_add(i) as *mut libc::c_void;
            // SAFETY: CMSG_SPACE is a pure size computation.
            m.msg_hdr.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        }
        iov_at += n;
        s.msgs.push(m);
    }
    // SAFETY: `msgs` holds `msgs.len()` initialised headers whose name, iovec and control
    // pointers point into `addrs`, `iovs` and `cmsgs` (complete, not reallocated until the next
    // call) and whose iovecs point into `bufs`, borrowed for this call. The kernel only reads
    // the buffers and writes `msg_len`.
    let r = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            s.msgs.as_mut_ptr(),
            s.msgs.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// Asks for `bytes` of kernel send and receive buffer (the kernel caps it at
/// `net.core.{w,r}mem_max`). Failure is not an error: the default buffers still work.
pub(crate) fn set_buffer_sizes(fd: BorrowedFd<'_>, bytes: usize) {
    let v = bytes.min(libc::c_int::MAX as usize) as libc::c_int;
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: `v` is a live c_int and its size is passed; setsockopt only reads it.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// Whether the kernel accepts UDP GSO on this socket.
pub(crate) fn gso_supported(fd: BorrowedFd<'_>) -> bool {
    let v: libc::c_int = 0;
    // SAFETY: `v` is a live c_int and its size is passed; setsockopt only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            &v as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// What `recvmmsg` reported for one buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received {
    pub len: usize,
    /// The sender, or `None` for a non-IPv4 sender.
    pub from: Option<SocketAddrV4>,
    /// The datagram was longer than the buffer.
    pub truncated: bool,
}

/// Reusable arrays for `recvmmsg`.
#[derive(Default)]
pub(crate) struct RecvScratch {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_in>,
}

/// Receives up to `bufs.len()` datagrams, one per buffer (each written over its whole
/// capacity). Returns how many (the first `n` buffers), with their metadata in `out`.
/// `Ok(0)` when nothing is waiting.
pub(crate) fn recv_batch(
    fd: BorrowedFd<'_>,
    bufs: &mut [RcBufMut],
    out: &mut Vec<Received>,
    s: &mut RecvScratch,
) -> io::Result<usize> {
    out.clear();
    s.msgs.clear();
    s.iovs.clear();
    s.addrs.clear();
    for b in bufs.iter_mut() {
        let full = b.full_mut();
        s.iovs.push(libc::iovec {
            iov_base: full.as_mut_ptr() as *mut libc::c_void,
            iov_len: full.len(),
        });
        // SAFETY: an all-zero sockaddr_in is valid.
        s.addrs.push(unsafe { zeroed() });
    }
    let iov_base = s.iovs.as_mut_ptr();
    let addr_base = s.addrs.as_mut_ptr();
    for i in 0..bufs.len() {
        // SAFETY: an all-zero `mmsghdr` is valid.
        let mut m: libc::mmsghdr = unsafe { zeroed() };
        m.msg_hdr.msg_name = addr_base.wrapping_add(i) as *mut libc::c_void;
        m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        m.msg_hdr.msg_iov = iov_base.wrapping_add(i);
        m.msg_hdr.msg_iovlen = 1;
        s.msgs.push(m);
    }
    if s.msgs.is_empty() {
        return Ok(0);
    }
    // SAFETY: each header points at one `sockaddr_in` of `addrs` and one iovec of `iovs`
    // (complete vectors), each iovec covering the whole capacity of a uniquely borrowed
    // `RcBufMut` (all bytes initialised, so the kernel may overwrite any of them); the
    // timeout is null.
    let r = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            s.msgs.as_mut_ptr(),
            s.msgs.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock {
            Ok(0)
        } else {
            Err(e)
        };
    }
    let n = r as usize;
    for i in 0..n {
        let m = &s.msgs[i];
        let a = &s.addrs[i];
        let from = (a.sin_family == libc::AF_INET as libc::sa_family_t).then(|| {
            SocketAddrV4::new(
                Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(a.sin_port),
            )
        });
        out.push(Received {
            len: (m.msg_len as usize).min(s.iovs[i].iov_len),
            from,
            truncated: m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        });
    }
    Ok(n)
}

/// Reads and discards one waiting datagram (when no receive buffer is available). Returns
/// whether there was one.
pub(crate) fn discard_one(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut scratch = [0u8; 64];
    // SAFETY: `scratch` is a live, writable 64-byte buffer and its length is passed.
    let r = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            scratch.as_mut_ptr() as *mut libc::c_void,
            scratch.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(true)
}
