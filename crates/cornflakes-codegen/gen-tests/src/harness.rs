//! What the client's allocation test and its callgrind driver share: a service of
//! `protos/rpc.proto` that answers with the request's id ([`IdStore`]), a server and a client
//! end on the in-process loopback NIC ([`loopback`], [`serve`]), and a datapath whose every call
//! goes through one out-of-line function that calls a hook on entry and exit ([`Fenced`]), so a
//! measurement can leave the datapath's own work out: the allocation test subtracts what
//! happens there, and the callgrind driver toggles collection there
//! (`--toggle-collect='cornflakes_codegen_tests::harness::fenced*'`).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{
    Completions, Connect, DatapathMemory, DropCounters, Receive, SendCounters, SendObject, Transmit,
};
use cornflakes::{ConnId, Datapath, Msg, PinnedMemory, RcBuf, RxMsg, SendError};
use cornflakes_rpc::{Cornflakes, Dispatcher, Handler, Keep, Kept, Replied, Reply, Unanswered};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

use crate::rpc::{Blob, BlobView, Store, StoreServer, Sum, SumView};

/// `rpc.Store` answering each method with the request's id only.
pub struct IdStore;

/// A `Blob` reply carrying `id` only.
fn blob<'r, D: Datapath, K: Keep>(
    id: u32,
    reply: Reply<'r, D, Blob<'r>, K>,
) -> Result<Replied, Unanswered> {
    let mut b = Blob::new_in(reply.arena());
    b.set_id(id);
    reply.send(&b)
}

/// A `Sum` reply carrying `id` only.
fn sum<'r, D: Datapath, K: Keep>(
    id: u32,
    reply: Reply<'r, D, Sum<'r>, K>,
) -> Result<Replied, Unanswered> {
    let mut s = Sum::new_in(reply.arena());
    s.set_id(id);
    reply.send(&s)
}

impl Store for IdStore {
    fn echo<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Blob<'r>>,
    ) -> Result<Replied, Unanswered> {
        blob(req.get_id(), reply)
    }

    fn measure<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Sum<'r>>,
    ) -> Result<Replied, Unanswered> {
        sum(req.get_id(), reply)
    }

    fn fetch<'r, D: Datapath>(
        &'r mut self,
        req: SumView<'r>,
        reply: Reply<'r, D, Blob<'r>>,
    ) -> Result<Replied, Unanswered> {
        blob(req.get_id(), reply)
    }

    fn count<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Sum<'r>, Kept<'r>>,
    ) -> Result<Replied, Unanswered> {
        sum(req.get_id(), reply)
    }

    fn take<'r, D: Datapath>(
        &'r mut self,
        req: SumView<'r>,
        reply: Reply<'r, D, Blob<'r>, Kept<'r>>,
    ) -> Result<Replied, Unanswered> {
        blob(req.get_id(), reply)
    }
}

/// A server end (its datapath and an [`IdStore`] served in the hybrid configuration) and a
/// client end with its connection to the server, address resolution done.
pub fn loopback() -> Result<(Loopback, StoreServer<IdStore>, Loopback, ConnId), String> {
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let nic =
        |last| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
    let (mut a, mut b) = Loopback::pair(nic(1), nic(2)).map_err(|e| e.to_string())?;
    let rt = Dispatcher::new(a.memory(), Cornflakes::Hybrid, 512);
    let mut server = StoreServer::new(IdStore, rt);
    let conn = b.connect(addr(1)).map_err(|e| e.to_string())?;
    serve(&mut a, &mut server, &mut Vec::new())?;
    b.recv_burst(&mut Vec::new()).map_err(|e| e.to_string())?;
    Ok((a, server, b, conn))
}

/// One turn of the server: receive a burst, answer it, flush, reap completions.
pub fn serve(
    dp: &mut Loopback,
    server: &mut StoreServer<IdStore>,
    rx: &mut Vec<RxMsg>,
) -> Result<(), String> {
    rx.clear();
    dp.recv_burst(rx).map_err(|e| e.to_string())?;
    for m in rx.drain(..) {
        server.handle(dp, &m).map_err(|e| format!("{e:?}"))?;
    }
    dp.flush().map_err(|e| e.to_string())?;
    dp.poll_completions();
    Ok(())
}

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
    fn send_counters(&self) -> Option<SendCounters> {
        self.dp.send_counters()
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
