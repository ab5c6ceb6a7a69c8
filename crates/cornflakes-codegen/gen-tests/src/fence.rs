//! A datapath whose every call goes through one out-of-line function that calls a hook on
//! entry and exit, so a measurement can leave the datapath's own work out: the allocation
//! test stops its count there, and the client's callgrind driver toggles collection there
//! (`--toggle-collect='cornflakes_codegen_tests::fence::fenced*'`).

use std::io;
use std::net::SocketAddrV4;

use cornflakes::datapath::{
    Completions, Connect, DatapathMemory, DropCounters, Receive, SendObject, Transmit,
};
use cornflakes::{ConnId, Datapath, Msg, PinnedMemory, RcBuf, RxMsg, SendError};

/// Datapath `D`; `hook(true)` runs before each of its calls and `hook(false)` after.
pub struct Fenced<D> {
    dp: D,
    hook: fn(bool),
}

impl<D> Fenced<D> {
    /// `dp` fenced by `hook`.
    pub fn new(dp: D, hook: fn(bool)) -> Self {
        Fenced { dp, hook }
    }
}

/// Runs `f` between the hook's calls; never inlined, so it is one symbol to toggle on.
#[inline(never)]
pub fn fenced<R>(hook: fn(bool), f: impl FnOnce() -> R) -> R {
    hook(true);
    let r = f();
    hook(false);
    r
}

impl<D: Datapath> DatapathMemory for Fenced<D> {
    fn memory(&self) -> &PinnedMemory {
        self.dp.memory()
    }
}

impl<D: Datapath> Connect for Fenced<D> {
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.connect(peer))
    }
    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.dp.peer_addr(conn)
    }
    fn local_addr(&self) -> SocketAddrV4 {
        self.dp.local_addr()
    }
}

impl<D: Datapath> Receive for Fenced<D> {
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.recv_burst(out))
    }
    fn counters(&self) -> DropCounters {
        self.dp.counters()
    }
}

impl<D: Datapath> Transmit for Fenced<D> {
    fn mtu(&self) -> usize {
        self.dp.mtu()
    }
    fn max_segments(&self) -> usize {
        self.dp.max_segments()
    }
    fn max_message_len(&self) -> usize {
        self.dp.max_message_len()
    }
    fn send_object<O: SendObject>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.send_object(conn, msg, obj))
    }
    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.send_sga(conn, msg, entries))
    }
    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.send_copy(conn, msg, data))
    }
    fn flush(&mut self) -> Result<(), SendError> {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.flush())
    }
}

impl<D: Datapath> Completions for Fenced<D> {
    fn poll_completions(&mut self) -> usize {
        let dp = &mut self.dp;
        fenced(self.hook, || dp.poll_completions())
    }
    fn in_flight(&self) -> usize {
        self.dp.in_flight()
    }
}
