//! How a server behaves when idle. Polling a kernel-bypass ring is cheap, and a NIC has no file
//! descriptor to sleep on: such a server yields after [`IDLE_SPINS`] empty polls. Each poll of
//! the socket datapath is a `recvmmsg` system call, so a socket server sharing cores with its
//! clients blocks on the socket after a few empty polls instead ([`socket_idle`]).

use std::time::Duration;

use datapath_socket::SocketDatapath;

/// Empty polls before a server that only yields when idle calls its idle hook (polling a
/// kernel-bypass ring is cheap).
pub const IDLE_SPINS: u32 = 64;

/// Empty polls before a socket server blocks: each poll is a `recvmmsg` system call, so
/// spinning on an idle socket burns the CPU the client threads need.
pub const SOCKET_IDLE_SPINS: u32 = 2;

/// How long an idle socket server blocks waiting for a datagram before polling again (and
/// checking whether it should stop).
pub const IDLE_WAIT: Duration = Duration::from_millis(10);

/// Blocks until `dp`'s socket has a datagram or its receive timeout (`SO_RCVTIMEO`, which the
/// datapath's own `MSG_DONTWAIT` calls ignore) passes, without consuming the datagram; the
/// socket is nonblocking again afterwards. Errors just end the wait early.
pub fn wait_readable(dp: &SocketDatapath) {
    let sock = dp.socket();
    if sock.set_nonblocking(false).is_ok() {
        let mut one = [0u8; 1];
        let _ = sock.peek_from(&mut one);
        let _ = sock.set_nonblocking(true);
    }
}

/// A socket server's idle policy: how many empty polls, then what. Blocks on the socket
/// ([`wait_readable`], at most [`IDLE_WAIT`]) unless `spin`, which polls [`IDLE_SPINS`] times
/// and yields.
pub fn socket_idle(spin: bool) -> (u32, impl FnMut(&SocketDatapath)) {
    let mut armed = false;
    let hook = move |dp: &SocketDatapath| {
        if spin {
            std::thread::yield_now();
            return;
        }
        if !armed {
            armed = dp.socket().set_read_timeout(Some(IDLE_WAIT)).is_ok();
        }
        if armed {
            wait_readable(dp);
        } else {
            std::thread::yield_now();
        }
    };
    (if spin { IDLE_SPINS } else { SOCKET_IDLE_SPINS }, hook)
}

/// A kernel-bypass server's idle hook: yield the CPU (after [`IDLE_SPINS`] empty polls).
pub fn yield_idle<T: ?Sized>(_: &T) {
    std::thread::yield_now();
}
