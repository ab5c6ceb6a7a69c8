//! io_uring `SENDMSG_ZC`: the alternative to `MSG_ZEROCOPY` ([`crate::ZeroCopyMode::IoUring`]).
//!
//! One ring per datapath. A zero-copy send is submitted as one `IORING_OP_SENDMSG_ZC` with the
//! connection's iovecs and `MSG_DONTWAIT`, and its result is waited for at once (it says how many
//! bytes the kernel took, like `sendmsg`'s return value). When the result carries
//! `IORING_CQE_F_MORE`, a notification CQE with the same `user_data` follows once the kernel no
//! longer refers to the pages; until then the datapath keeps its references. The send asks for
//! `IORING_SEND_ZC_REPORT_USAGE`, so the notification says whether the kernel copied after all
//! (`IORING_NOTIF_USAGE_ZC_COPIED`; loopback always does).

use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{cqueue, opcode, types, IoUring};

/// `IORING_SEND_ZC_REPORT_USAGE` (`sqe->ioprio` of a zero-copy send): report in the
/// notification whether the data was copied.
const SEND_ZC_REPORT_USAGE: u16 = 8;
/// `IORING_NOTIF_USAGE_ZC_COPIED`: set in a notification's `res` when the kernel copied.
const NOTIF_USAGE_ZC_COPIED: i32 = i32::MIN;

/// A zero-copy send's notification: the kernel is done with the buffers of send `user_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Notification {
    pub user_data: u64,
    /// The kernel copied the data instead of sending from the pages.
    pub copied: bool,
}

/// A send's result CQE: the bytes the kernel took, or the error, and whether a notification
/// with the same `user_data` follows (`IORING_CQE_F_MORE`). The kernel posts one even for a
/// send that failed (e.g. `EAGAIN` on a full socket buffer): its send number must stay
/// reserved until that notification arrives, or it would release a later send's buffers early.
#[derive(Debug)]
pub(crate) struct SendResult {
    pub result: io::Result<usize>,
    pub more: bool,
}

impl SendResult {
    fn of(res: i32, flags: u32) -> SendResult {
        SendResult {
            result: if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else {
                Ok(res as usize)
            },
            more: cqueue::more(flags),
        }
    }
}

/// The ring, and notifications read while waiting for a send's result.
pub(crate) struct ZcRing {
    ring: IoUring,
    pending: Vec<Notification>,
    /// `io_uring_enter` calls made (submissions and waits).
    enters: u64,
}

impl std::fmt::Debug for ZcRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZcRing")
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl ZcRing {
    /// A ring with `entries` submission entries (the completion queue is twice that; a send
    /// in flight holds one completion slot for its notification, and notifications beyond
    /// the queue's size are kept by the kernel in its overflow list, not lost).
    pub(crate) fn new(entries: u32) -> io::Result<ZcRing> {
        Ok(ZcRing {
            ring: IoUring::new(entries)?,
            pending: Vec::new(),
            enters: 0,
        })
    }

    /// Sends `iov` on `fd` as one `SENDMSG_ZC` tagged `user_data` and waits for its result:
    /// the bytes the kernel took and whether a notification will follow (then the caller must
    /// keep every buffer the taken bytes lie in until [`ZcRing::drain`] returns it). `EAGAIN`,
    /// `ENOBUFS` and socket errors come back as errors, as from `sendmsg` (possibly with a
    /// notification to come, see [`SendResult`]); so do errors of the ring itself.
    pub(crate) fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        iov: &mut [libc::iovec],
        user_data: u64,
    ) -> SendResult {
        match self.send_one(fd, iov, user_data) {
            Ok(r) => r,
            Err(e) => SendResult {
                result: Err(e),
                more: false,
            },
        }
    }

    fn send_one(
        &mut self,
        fd: BorrowedFd<'_>,
        iov: &mut [libc::iovec],
        user_data: u64,
    ) -> io::Result<SendResult> {
        // SAFETY: an all-zero msghdr is valid (no name, no control data).
        let mut m: libc::msghdr = unsafe { zeroed() };
        m.msg_iov = iov.as_mut_ptr();
        m.msg_iovlen = iov.len() as _;
        let sqe = opcode::SendMsgZc::new(types::Fd(fd.as_raw_fd()), &m)
            .flags((libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as u32)
            .ioprio(SEND_ZC_REPORT_USAGE)
            .build()
            .user_data(user_data);
        // SAFETY: `m` and `iov` (and the buffers its entries point into, borrowed by the
        // caller's queue) live until the result CQE is read below, after which the kernel no
        // longer reads the msghdr; the data pages are kept alive by the caller until the
        // notification.
        unsafe {
            if self.ring.submission().push(&sqe).is_err() {
                // The submission queue is full only if earlier entries were not submitted.
                self.enters += 1;
                self.ring.submit()?;
                self.ring
                    .submission()
                    .push(&sqe)
                    .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            }
        }
        loop {
            self.enters += 1;
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let mut result = None;
            for cqe in self.ring.completion() {
                if cqueue::notif(cqe.flags()) {
                    self.pending.push(Notification {
                        user_data: cqe.user_data(),
                        copied: cqe.result() & NOTIF_USAGE_ZC_COPIED != 0,
                    });
                } else if cqe.user_data() == user_data && result.is_none() {
                    result = Some(SendResult::of(cqe.result(), cqe.flags()));
                }
            }
            if let Some(r) = result {
                return Ok(r);
            }
        }
    }

    /// `io_uring_enter` calls made so far.
    pub(crate) fn enters(&self) -> u64 {
        self.enters
    }

    /// Moves every notification that has arrived into `out`.
    pub(crate) fn drain(&mut self, out: &mut Vec<Notification>) {
        out.append(&mut self.pending);
        for cqe in self.ring.completion() {
            if cqueue::notif(cqe.flags()) {
                out.push(Notification {
                    user_data: cqe.user_data(),
                    copied: cqe.result() & NOTIF_USAGE_ZC_COPIED != 0,
                });
            }
        }
    }
}

/// One zero-copy send of a batch ([`ZcRing::send_batch`]): a connection's socket, its iovecs
/// and the tag its result and notification carry.
#[derive(Debug)]
pub(crate) struct BatchSend {
    pub fd: std::os::fd::RawFd,
    pub iov: Vec<libc::iovec>,
    pub user_data: u64,
    /// Bytes the iovecs hold.
    pub len: usize,
    /// The send's result, as from [`ZcRing::send`], once it has arrived.
    pub result: Option<SendResult>,
}

impl ZcRing {
    /// Submits every send of `batch` (several connections' `SENDMSG_ZC`s) and waits for all
    /// their results: one `io_uring_enter` for the batch when the submission queue holds it,
    /// where [`ZcRing::send`] takes one per send. Each send's result is left in its `result`;
    /// notifications are kept for [`ZcRing::drain`] as in [`ZcRing::send`]. An error of the
    /// ring itself (not of a send) is returned; the sends still without a result may or may
    /// not have been made.
    pub(crate) fn send_batch(&mut self, batch: &mut [BatchSend]) -> io::Result<()> {
        // The msghdrs live here until every result is read (the kernel reads a msghdr when it
        // runs the send, which may be as late as the wait below).
        // SAFETY: an all-zero msghdr is valid (no name, no control data).
        let mut msgs: Vec<libc::msghdr> = batch.iter().map(|_| unsafe { zeroed() }).collect();
        let mut index = std::collections::HashMap::with_capacity(batch.len());
        for (i, (b, m)) in batch.iter_mut().zip(msgs.iter_mut()).enumerate() {
            m.msg_iov = b.iov.as_mut_ptr();
            m.msg_iovlen = b.iov.len() as _;
            index.insert(b.user_data, i);
        }
        let mut waiting = 0usize;
        for (b, m) in batch.iter().zip(msgs.iter()) {
            let sqe = opcode::SendMsgZc::new(types::Fd(b.fd), m)
                .flags((libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) as u32)
                .ioprio(SEND_ZC_REPORT_USAGE)
                .build()
                .user_data(b.user_data);
            // SAFETY: `m`, the iovecs it points at (in `batch`) and the buffers they point
            // into (borrowed by the caller's queues) live until every result CQE is read
            // below; the data pages are kept by the caller until the notifications.
            unsafe {
                while self.ring.submission().push(&sqe).is_err() {
                    // The submission queue is full: hand it to the kernel first.
                    self.enters += 1;
                    self.ring.submit()?;
                }
            }
            waiting += 1;
        }
        while waiting > 0 {
            // Every result arrives (the sends do not block); notifications only add entries.
            self.enters += 1;
            match self.ring.submit_and_wait(waiting) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for cqe in self.ring.completion() {
                if cqueue::notif(cqe.flags()) {
                    self.pending.push(Notification {
                        user_data: cqe.user_data(),
                        copied: cqe.result() & NOTIF_USAGE_ZC_COPIED != 0,
                    });
                    continue;
                }
                let Some(&i) = index.get(&cqe.user_data()) else {
                    continue;
                };
                let b = &mut batch[i];
                if b.result.is_some() {
                    continue;
                }
                b.result = Some(SendResult::of(cqe.result(), cqe.flags()));
                waiting -= 1;
            }
        }
        drop(msgs);
        Ok(())
    }
}
