//! The only `unsafe` code of the crate: `epoll`, `sendmsg` with iovecs (and `MSG_ZEROCOPY`),
//! the socket error queue that carries zero-copy completions, and `setsockopt`, through libc.
//!
//! Every function here is safe to call: the kernel only reads the buffers of a send during
//! the call (or, with `MSG_ZEROCOPY`, keeps them until its completion — the caller holds their
//! references until then, see `zc.rs`), and every pointer handed to the kernel points into
//! memory borrowed for the duration of the call.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::txq::TxQueue;

/// `SO_ZEROCOPY` from `<asm-generic/socket.h>` (x86-64, arm64; not in the libc crate's main API).
const SO_ZEROCOPY: libc::c_int = 60;
/// `SO_EE_ORIGIN_ZEROCOPY` from `<linux/errqueue.h>`.
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED` from `<linux/errqueue.h>`: the kernel copied the data after all.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// Most iovecs per `sendmsg` (`UIO_MAXIOV`).
pub(crate) const MAX_IOV: usize = 1024;

/// An epoll instance.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

/// Interest flags.
pub(crate) const IN: u32 = libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32;
/// Writable.
pub(crate) const OUT: u32 = libc::EPOLLOUT as u32;

impl Epoll {
    /// A new epoll instance returning up to `max_events` events per wait.
    pub(crate) fn new(max_events: usize) -> io::Result<Epoll> {
        // SAFETY: plain system call with a flag argument.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll {
            fd,
            // SAFETY: an all-zero epoll_event is valid plain data.
            events: vec![unsafe { zeroed() }; max_events.max(1)],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a live epoll_event; the kernel copies it.
        let r = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Watches `fd` for `events`, reporting `token`.
    pub(crate) fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd.as_raw_fd(), events, token)
    }

    /// Changes the events watched on `fd`.
    pub(crate) fn modify(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd.as_raw_fd(), events, token)
    }

    /// Stops watching `fd`.
    pub(crate) fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd.as_raw_fd(), 0, 0)
    }

    /// Waits up to `timeout_ms` for any descriptor to be ready, without taking its events
    /// (level-triggered: the next [`wait`](Self::wait) reports them). Returns whether one is.
    pub(crate) fn wait_ready(&self, timeout_ms: i32) -> io::Result<bool> {
        // SAFETY: an all-zero epoll_event is valid plain data.
        let mut ev: libc::epoll_event = unsafe { zeroed() };
        // SAFETY: `ev` is one live epoll_event the kernel may write; maxevents is 1.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), &mut ev, 1, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(n > 0)
    }

    /// Waits up to `timeout_ms` (0: poll) and returns the ready `(token, events)` pairs.
    pub(crate) fn wait(&mut self, timeout_ms: i32, out: &mut Vec<(u64, u32)>) -> io::Result<()> {
        out.clear();
        // SAFETY: `events` is a live array of `len` epoll_events the kernel may write.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for ev in &self.events[..n as usize] {
            let (token, events) = (ev.u64, ev.events);
            out.push((token, events));
        }
        Ok(())
    }
}

/// Sends the unsent bytes of up to [`MAX_IOV`] buffers of `q` with one
/// `sendmsg(MSG_DONTWAIT | MSG_NOSIGNAL)`, adding `MSG_ZEROCOPY` when `allow_zero_copy` and one
/// of them is a zero-copy field. Returns the bytes the kernel took and whether the send was a
/// zero-copy one: then the kernel keeps referring to the buffers it took until it reports the
/// send complete on the error queue ([`read_completions`]), and the caller must keep them alive
/// until then. `iov` is scratch space kept between calls.
pub(crate) fn send_queue(
    fd: BorrowedFd<'_>,
    q: &TxQueue,
    iov: &mut Vec<libc::iovec>,
    allow_zero_copy: bool,
) -> io::Result<(usize, bool)> {
    let zc = fill_iov(q, iov) && allow_zero_copy;
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut m: libc::msghdr = unsafe { zeroed() };
    m.msg_iov = iov.as_mut_ptr();
    m.msg_iovlen = iov.len() as _;
    let mut flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    if zc {
        flags |= libc::MSG_ZEROCOPY;
    }
    // SAFETY: `m` points at `iov` (complete, not reallocated during the call), whose entries
    // point into buffers of `q`, borrowed for this call; the kernel only reads them. For a
    // MSG_ZEROCOPY send the caller keeps references to them until the completion.
    let r = unsafe { libc::sendmsg(fd.as_raw_fd(), &m, flags) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((r as usize, zc))
    }
}

/// Fills `iov` with the unsent bytes of up to [`MAX_IOV`] buffers of `q`; says whether one of
/// them is a zero-copy field.
pub(crate) fn fill_iov(q: &TxQueue, iov: &mut Vec<libc::iovec>) -> bool {
    iov.clear();
    q.for_each_unsent(MAX_IOV, |s| {
        iov.push(libc::iovec {
            iov_base: s.as_ptr() as *mut libc::c_void,
            iov_len: s.len(),
        })
    })
}

/// Turns `SO_ZEROCOPY` on; `false` when the kernel refuses (then sends copy).
pub(crate) fn enable_zero_copy(fd: BorrowedFd<'_>) -> bool {
    set_int(fd, libc::SOL_SOCKET, SO_ZEROCOPY, 1).is_ok()
}

/// Sets `TCP_NODELAY` (messages leave as soon as they are written).
pub(crate) fn set_nodelay(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// Bytes waiting in the socket's receive queue (`FIONREAD`); 0 when the kernel does not say.
pub(crate) fn bytes_readable(fd: BorrowedFd<'_>) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points at a live c_int.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n as *mut libc::c_int) };
    if r == 0 {
        n.max(0) as usize
    } else {
        0
    }
}

/// Asks for `bytes` of kernel send and receive buffer (capped by the kernel).
pub(crate) fn set_buffer_sizes(fd: BorrowedFd<'_>, bytes: usize) {
    let v = bytes.min(libc::c_int::MAX as usize) as libc::c_int;
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // Failure is not an error: the default buffers still work.
        let _ = set_int(fd, libc::SOL_SOCKET, opt, v);
    }
}

fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` is a live c_int and its size is passed; setsockopt only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One zero-copy completion: the sends numbered `lo..=hi` (wrapping) are done; `copied` when
/// the kernel copied their data after all (loopback always does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ZcCompletion {
    pub lo: u32,
    pub hi: u32,
    pub copied: bool,
}

/// Control-message space for one `sock_extended_err` (plus an address), 8-byte aligned.
#[repr(C, align(8))]
struct CmsgSpace([u8; 128]);

/// Reads the socket's error queue until it is empty, appending the zero-copy completions to
/// `out`. Returns an error only for a socket error (not for an empty queue); other queued
/// errors are skipped.
pub(crate) fn read_completions(fd: BorrowedFd<'_>, out: &mut Vec<ZcCompletion>) -> io::Result<()> {
    loop {
        let mut space = CmsgSpace([0; 128]);
        // SAFETY: an all-zero msghdr is valid.
        let mut m: libc::msghdr = unsafe { zeroed() };
        m.msg_control = space.0.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = space.0.len() as _;
        // SAFETY: `m` points at `space`, a live writable buffer of the given length; no iovec.
        let r = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut m,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(())
            } else {
                Err(e)
            };
        }
        // SAFETY: `m` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay inside `msg_control`
        // (bounded by `msg_controllen`, which the kernel set to what it wrote).
        let mut c = unsafe { libc::CMSG_FIRSTHDR(&m) };
        while !c.is_null() {
            // SAFETY: `c` is a non-null header inside `space` (see above).
            let h = unsafe { &*c };
            let is_recverr = (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
            // SAFETY: pure size computation.
            let need = unsafe { libc::CMSG_LEN(size_of::<libc::sock_extended_err>() as u32) };
            if is_recverr && h.cmsg_len as usize >= need as usize {
                // SAFETY: the header's length covers a sock_extended_err after it; it may be
                // unaligned inside `space`, so it is read unaligned.
                let ee = unsafe {
                    std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::sock_extended_err)
                };
                if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                    out.push(ZcCompletion {
                        lo: ee.ee_info,
                        hi: ee.ee_data,
                        copied: ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                    });
                }
            }
            // SAFETY: `m` and `c` as above.
            c = unsafe { libc::CMSG_NXTHDR(&m, c) };
        }
    }
}
