//! The datapath as a handler sees it: a send that meets a full queue is sent again.

use std::io;
use std::net::SocketAddrV4;

use cornflakes::datapath::{
    Completions, Connect, DatapathMemory, DropCounters, Receive, SendCounters, SendObject, Transmit,
};
use cornflakes::{ConnId, Datapath, Msg, PinnedMemory, RcBuf, RxMsg, SendError};

/// The counters [`Tx`] keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Sends that met a full queue and were made again.
    pub retries: u64,
    /// Errors of the flushes made to free room.
    pub flush_errors: u64,
    /// Nanoseconds spent in the send calls of [timed](Tx::timed) requests (the sampled ones:
    /// `percore::TimeSplit::sampled_send_ns`).
    pub sampled_send_ns: u64,
}

/// The server's datapath `D` lent to a handler for one request. It is a [`Datapath`] itself,
/// so a handler's reply code stays generic; every send (`send_object`, `send_sga`,
/// `send_copy`) that fails with [`SendError::Full`] flushes the queue, reaps completions and
/// makes *the same send* once more, with the reply the handler already built. The request is
/// never run again: a write is applied once however full the queue is. A send
/// queues nothing when it fails, so the retry cannot duplicate a reply either.
pub struct Tx<'a, D> {
    dp: &'a mut D,
    counters: &'a mut TxCounters,
    timed: bool,
}

impl<'a, D: Datapath> Tx<'a, D> {
    /// Lends `dp`, counting retries in `counters`.
    pub fn new(dp: &'a mut D, counters: &'a mut TxCounters) -> Self {
        Tx {
            dp,
            counters,
            timed: false,
        }
    }

    /// With `on`, times every send call (retry included) into
    /// [`TxCounters::sampled_send_ns`]: the server skeleton does it for the requests whose
    /// handling it samples, so a send costs no clock read otherwise.
    pub fn timed(mut self, on: bool) -> Self {
        self.timed = on;
        self
    }

    /// The datapath itself.
    pub fn inner(&mut self) -> &mut D {
        self.dp
    }

    #[inline]
    fn retrying(
        &mut self,
        mut send: impl FnMut(&mut D) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        let start = self.timed.then(percore::now_ns);
        let r = match send(self.dp) {
            Err(SendError::Full) => {
                self.counters.retries += 1;
                if self.dp.flush().is_err() {
                    self.counters.flush_errors += 1;
                }
                self.dp.poll_completions();
                send(self.dp)
            }
            r => r,
        };
        if let Some(start) = start {
            self.counters.sampled_send_ns += percore::now_ns().saturating_sub(start);
        }
        r
    }
}

impl<D: Datapath> DatapathMemory for Tx<'_, D> {
    fn memory(&self) -> &PinnedMemory {
        self.dp.memory()
    }
}

impl<D: Datapath> Connect for Tx<'_, D> {
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

impl<D: Datapath> Receive for Tx<'_, D> {
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        self.dp.recv_burst(out)
    }

    fn counters(&self) -> DropCounters {
        self.dp.counters()
    }
}

impl<D: Datapath> Transmit for Tx<'_, D> {
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
        self.retrying(|dp| dp.send_object(conn, msg, obj))
    }

    #[inline]
    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        self.retrying(|dp| dp.send_sga(conn, msg, entries))
    }

    #[inline]
    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.retrying(|dp| dp.send_copy(conn, msg, data))
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.dp.flush()
    }

    fn send_counters(&self) -> Option<SendCounters> {
        self.dp.send_counters()
    }
}

impl<D: Datapath> Completions for Tx<'_, D> {
    fn poll_completions(&mut self) -> usize {
        self.dp.poll_completions()
    }

    fn in_flight(&self) -> usize {
        self.dp.in_flight()
    }
}
