//! A datapath that lets something else run before each of its receives: a client and an
//! in-process server in one thread (tests, the KV store's fault check), without the client
//! knowing.

use std::io;
use std::net::SocketAddrV4;

use cornflakes::datapath::{
    Completions, Connect, DatapathMemory, DropCounters, Receive, SendCounters, SendObject, Transmit,
};
use cornflakes::{ConnId, Datapath, Msg, PinnedMemory, RcBuf, RxMsg, SendError};

/// Datapath `D`, whose every [`recv_burst`](Receive::recv_burst) first calls `before` (e.g.
/// one poll of a server on the other end of an in-process wire). Everything else is `D`'s.
pub struct Interleaved<D, F> {
    dp: D,
    before: F,
}

impl<D: Datapath, F: FnMut()> Interleaved<D, F> {
    /// `dp`, running `before` ahead of each receive.
    pub fn new(dp: D, before: F) -> Self {
        Interleaved { dp, before }
    }

    /// The datapath.
    pub fn inner(&self) -> &D {
        &self.dp
    }

    /// The datapath and the function, given back.
    pub fn into_parts(self) -> (D, F) {
        (self.dp, self.before)
    }
}

impl<D: Datapath, F> DatapathMemory for Interleaved<D, F> {
    fn memory(&self) -> &PinnedMemory {
        self.dp.memory()
    }
}

impl<D: Datapath, F> Connect for Interleaved<D, F> {
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        self.dp.connect(peer)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.dp.peer_addr(conn)
    }

    fn local_addr(&self) -> SocketAddrV4 {
        self.dp.local_addr()
    }

    fn resolved(&self, conn: ConnId) -> bool {
        self.dp.resolved(conn)
    }
}

impl<D: Datapath, F: FnMut()> Receive for Interleaved<D, F> {
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        (self.before)();
        self.dp.recv_burst(out)
    }

    fn counters(&self) -> DropCounters {
        self.dp.counters()
    }
}

impl<D: Datapath, F> Transmit for Interleaved<D, F> {
    fn mtu(&self) -> usize {
        self.dp.mtu()
    }

    fn max_segments(&self) -> usize {
        self.dp.max_segments()
    }

    fn max_message_len(&self) -> usize {
        self.dp.max_message_len()
    }

    #[inline]
    fn send_object<O: SendObject>(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        self.dp.send_object(conn, msg, obj)
    }

    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        self.dp.send_sga(conn, msg, entries)
    }

    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.dp.send_copy(conn, msg, data)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.dp.flush()
    }

    fn send_counters(&self) -> Option<SendCounters> {
        self.dp.send_counters()
    }
}

impl<D: Datapath, F> Completions for Interleaved<D, F> {
    fn poll_completions(&mut self) -> usize {
        self.dp.poll_completions()
    }

    fn in_flight(&self) -> usize {
        self.dp.in_flight()
    }
}
