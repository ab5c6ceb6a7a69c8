//! The client side of a generated service, for one server connection of a datapath: a
//! closed-loop [`Client::call`] that waits with a timeout and sends the request again under
//! the same message id, and an open-loop interface for load generators ([`Client::send`],
//! then [`Client::poll`]) that keeps a bounded table of outstanding ids and allocates nothing
//! per request.
//!
//! A generated `<Service>Client<D>` wraps a [`Client`] with one typed method per rpc.

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use cornflakes::datapath::SendObject;
use cornflakes::wire::MessageView;
use cornflakes::{ConnId, Datapath, DecodeError, Msg, RcBuf, RxMsg, SendError};

use crate::ids::ClientIds;
use crate::outstanding::Outstanding;
use crate::rpc_error::{RpcError, ERROR_TYPE};

/// How a [`Client::call`] waits and retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How long to wait for a reply before sending the request again (and, open loop, before
    /// a request is reported [`CallError::TimedOut`]).
    pub timeout: Duration,
    /// Sends of one request in all (the first and the retries) by `call`.
    pub tries: u32,
}

impl Default for RetryPolicy {
    /// 5 ms and 8 tries.
    fn default() -> Self {
        RetryPolicy {
            timeout: Duration::from_millis(5),
            tries: 8,
        }
    }
}

/// Why a call has no reply.
#[derive(Debug)]
pub enum CallError {
    /// No reply came in time (after every try, for `call`): the request may or may not have
    /// run (once, for a method run exactly once).
    TimedOut,
    /// The server refused the request with an error reply (a method it does not have).
    Refused(RpcError),
    /// The reply does not read as the method's reply.
    BadReply(DecodeError),
    /// The reply's message type is neither the request's nor an error reply's.
    WrongType {
        /// The request's message type.
        sent: u16,
        /// The reply's.
        got: u16,
    },
    /// The request could not be sent.
    Send(SendError),
    /// The open-loop table is full: the request as many ids older is still outstanding.
    Full,
    /// `call` while open-loop requests are outstanding: one client does one or the other.
    Busy,
    /// Receiving failed.
    Io(io::Error),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::TimedOut => f.write_str("no reply in time"),
            CallError::Refused(e) => write!(f, "refused: {e}"),
            CallError::BadReply(e) => write!(f, "bad reply: {e}"),
            CallError::WrongType { sent, got } => {
                write!(
                    f,
                    "a reply of message type {got} to a request of type {sent}"
                )
            }
            CallError::Send(e) => write!(f, "send failed: {e}"),
            CallError::Full => f.write_str("too many requests outstanding"),
            CallError::Busy => f.write_str("open-loop requests are outstanding"),
            CallError::Io(e) => write!(f, "receive failed: {e}"),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Refused(e) => Some(e),
            CallError::BadReply(e) => Some(e),
            CallError::Send(e) => Some(e),
            CallError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DecodeError> for CallError {
    fn from(e: DecodeError) -> Self {
        CallError::BadReply(e)
    }
}

/// What a [`Client`] has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests called (closed loop).
    pub calls: u64,
    /// Requests sent again under the same id (closed loop).
    pub retries: u64,
    /// Requests sent open loop.
    pub sent: u64,
    /// Replies matched to an outstanding request.
    pub replies: u64,
    /// Requests with no reply in time (after every try, closed loop).
    pub timed_out: u64,
    /// Error replies.
    pub refused: u64,
    /// Replies to no outstanding request (late, or a second copy), ignored.
    pub stale_replies: u64,
    /// Open-loop sends refused because the table was full.
    pub full: u64,
    /// Failed flushes and receives of `poll` (what was queued is lost and its requests time
    /// out; a failed receive is an empty burst).
    pub io_errors: u64,
}

/// A reply's view type at every lifetime, so a [`Response`] can open it: implemented by
/// generated code for the view of each method's reply (`impl ReplyView for MView<'static>`).
pub trait ReplyView {
    /// The view of the reply's bytes.
    type View<'a>: MessageView<'a>;
}

/// A reply received by [`Client::call`]: the received buffer (no copy), read in place by
/// [`view`](Self::view).
pub struct Response<V> {
    rx: RxMsg,
    _view: PhantomData<fn() -> V>,
}

impl<V: ReplyView> Response<V> {
    /// The reply `rx` (a message of the method's type).
    pub fn new(rx: RxMsg) -> Self {
        Response {
            rx,
            _view: PhantomData,
        }
    }

    /// The reply read in place (its header checked; each field when read).
    #[inline]
    pub fn view(&self) -> Result<V::View<'_>, CallError> {
        Ok(V::View::open_at(self.rx.data.as_slice(), 0, 0)?)
    }

    /// The reply's bytes.
    pub fn data(&self) -> &RcBuf {
        &self.rx.data
    }

    /// The reply as received.
    pub fn into_inner(self) -> RxMsg {
        self.rx
    }
}

impl<V> fmt::Debug for Response<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("msg", &self.rx.msg)
            .field("len", &self.rx.data.len())
            .finish()
    }
}

/// Opens the reply `m` to a request of type `ty`: the method's reply, or the error reply's
/// contents as [`CallError::Refused`].
#[inline]
pub fn check_reply(m: &RxMsg, ty: u16) -> Result<(), CallError> {
    if m.msg.ty == ty {
        return Ok(());
    }
    Err(refusal(m, ty))
}

#[cold]
#[inline(never)]
fn refusal(m: &RxMsg, ty: u16) -> CallError {
    if m.msg.ty != ERROR_TYPE {
        return CallError::WrongType {
            sent: ty,
            got: m.msg.ty,
        };
    }
    match RpcError::decode(m.data.as_slice()) {
        Ok(mut e) => {
            e.method = ty;
            CallError::Refused(e)
        }
        Err(e) => CallError::BadReply(e),
    }
}

/// A client of one server connection `conn` of datapath `D`. Its requests carry its identity
/// ([`ClientIds`]: an incarnation and ids never reused under it), so a server that runs a
/// method exactly once knows a retry, on any connection, from a new request.
pub struct Client<D> {
    dp: D,
    conn: ConnId,
    ids: ClientIds,
    policy: RetryPolicy,
    table: Outstanding,
    rx: Vec<RxMsg>,
    /// The clock at the last poll that read it, and when a request sent now times out.
    now: Instant,
    deadline: Instant,
    polls: u32,
    unflushed: bool,
    stats: ClientStats,
}

/// Outstanding open-loop requests a client keeps by default.
pub const DEFAULT_OUTSTANDING: usize = 4096;

/// Open-loop polls between two reads of the clock while replies keep coming (an empty poll
/// always reads it): the timeouts' resolution under load, in polls.
const CLOCK_EVERY: u32 = 32;

impl<D: Datapath> Client<D> {
    /// A client of the server on `conn` of `dp`, retrying by `policy`, with up to
    /// [`DEFAULT_OUTSTANDING`] open-loop requests, and the process's identity
    /// ([`ClientIds::process`]: a client made after a reconnect goes on where the last one
    /// stopped, so its retries of a write are still recognised).
    pub fn new(dp: D, conn: ConnId, policy: RetryPolicy) -> Client<D> {
        Client::with_capacity(dp, conn, policy, DEFAULT_OUTSTANDING)
    }

    /// [`new`](Self::new) with up to `outstanding` open-loop requests (rounded up to a power
    /// of two).
    pub fn with_capacity(
        dp: D,
        conn: ConnId,
        policy: RetryPolicy,
        outstanding: usize,
    ) -> Client<D> {
        let now = Instant::now();
        Client {
            dp,
            conn,
            ids: ClientIds::process(),
            policy,
            table: Outstanding::new(outstanding, now),
            rx: Vec::with_capacity(64),
            now,
            deadline: now + policy.timeout,
            polls: 0,
            unflushed: false,
            stats: ClientStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// The datapath.
    pub fn datapath(&self) -> &D {
        &self.dp
    }

    /// The datapath, mutably.
    pub fn datapath_mut(&mut self) -> &mut D {
        &mut self.dp
    }

    /// The same client with identity `ids` instead of the process's: `ClientIds::fresh()` for
    /// a client whose requests never outlive it (a load generator's thread; its ids then
    /// count up without gaps), or one fixed incarnation to act out a restart in a test.
    pub fn with_ids(mut self, ids: ClientIds) -> Client<D> {
        self.ids = ids;
        self
    }

    /// The identity its requests carry.
    pub fn ids(&self) -> &ClientIds {
        &self.ids
    }

    /// The datapath, given back.
    pub fn into_datapath(self) -> D {
        self.dp
    }

    /// The server's connection.
    pub fn conn(&self) -> ConnId {
        self.conn
    }

    /// Sends the requests from now on on `conn` of the same datapath (e.g. another core of a
    /// server that runs one port per core). Replies are matched by id whatever connection
    /// they come on.
    #[inline]
    pub fn use_conn(&mut self, conn: ConnId) {
        self.conn = conn;
    }

    /// How calls wait and retry.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Open-loop requests outstanding.
    pub fn outstanding(&self) -> usize {
        self.table.len()
    }

    /// How many open-loop requests fit.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Sends request `req` of message type `ty` without waiting: its id, or why it was not
    /// sent. Its reply (or its timeout, after the policy's timeout) comes out of
    /// [`poll`](Self::poll). Nothing is allocated.
    #[inline]
    pub fn send<O: SendObject>(&mut self, ty: u16, req: &O) -> Result<u32, CallError> {
        let conn = self.conn;
        self.send_with(ty, |dp, msg| dp.send_object(conn, msg, req))
    }

    /// [`send`](Self::send) of bytes encoded already (copied into the packet).
    pub fn send_bytes(&mut self, ty: u16, req: &[u8]) -> Result<u32, CallError> {
        let conn = self.conn;
        self.send_with(ty, |dp, msg| dp.send_copy(conn, msg, req))
    }

    #[inline]
    fn send_with(
        &mut self,
        ty: u16,
        send: impl FnOnce(&mut D, Msg) -> Result<(), SendError>,
    ) -> Result<u32, CallError> {
        if self.table.len() == 0 {
            // The first request outstanding: the clock of the last poll may be old.
            self.tick();
        }
        // An id refused below is not sent, and never reused: the next request takes the next.
        let msg = self.ids.next(ty);
        if !self
            .table
            .insert(msg.incarnation, msg.id, ty, self.deadline)
        {
            self.stats.full += 1;
            return Err(CallError::Full);
        }
        if let Err(e) = send(&mut self.dp, msg) {
            self.table.take(msg.incarnation, msg.id);
            return Err(CallError::Send(e));
        }
        self.unflushed = true;
        self.stats.sent += 1;
        Ok(msg.id)
    }

    /// Flushes what [`send`](Self::send) queued (also done by [`poll`](Self::poll)).
    pub fn flush(&mut self) -> Result<(), SendError> {
        self.unflushed = false;
        self.dp.flush()
    }

    /// Flushes what was sent, receives one burst, and hands every reply to an outstanding
    /// request to `reply` as (id, message type, the reply or why there is none); requests
    /// whose timeout passed come out as [`CallError::TimedOut`]. Replies to no outstanding
    /// request are counted and dropped. Returns the messages received.
    pub fn poll(&mut self, mut reply: impl FnMut(u32, u16, Result<&RxMsg, CallError>)) -> usize {
        if self.unflushed {
            self.unflushed = false;
            if self.dp.flush().is_err() {
                // What was queued is lost; its requests time out.
                self.stats.io_errors += 1;
            }
        }
        self.dp.poll_completions();
        let mut rx = std::mem::take(&mut self.rx);
        rx.clear();
        let received = self.dp.recv_burst(&mut rx);
        let n = rx.len();
        for m in rx.drain(..) {
            match self.table.take(m.msg.incarnation, m.msg.id) {
                Some(ty) => {
                    self.stats.replies += 1;
                    match check_reply(&m, ty) {
                        Ok(()) => reply(m.msg.id, ty, Ok(&m)),
                        Err(e) => {
                            self.stats.refused += matches!(e, CallError::Refused(_)) as u64;
                            reply(m.msg.id, ty, Err(e))
                        }
                    }
                }
                _ => self.stats.stale_replies += 1,
            }
        }
        self.rx = rx;
        if received.is_err() {
            self.stats.io_errors += 1;
        }
        self.polls = self.polls.wrapping_add(1);
        if n == 0 || self.polls.is_multiple_of(CLOCK_EVERY) {
            self.tick();
            let stats = &mut self.stats;
            self.table.expire(self.now, |id, ty| {
                stats.timed_out += 1;
                reply(id, ty, Err(CallError::TimedOut))
            });
        }
        n
    }

    /// Reads the clock: requests sent from now on time out `policy.timeout` after it.
    fn tick(&mut self) {
        self.now = Instant::now();
        self.deadline = self.now + self.policy.timeout;
    }

    /// Sends request `req` of type `ty` and waits for its reply, sending it again under the
    /// same incarnation and id after every `policy.timeout` without one, `policy.tries` times
    /// in all (a server that runs the method exactly once answers a retry with its first
    /// reply). Not while open-loop requests are outstanding ([`CallError::Busy`]).
    pub fn call<O: SendObject>(&mut self, ty: u16, req: &O) -> Result<RxMsg, CallError> {
        let conn = self.conn;
        self.call_with(ty, Patience::Time, |dp, msg| dp.send_object(conn, msg, req))
    }

    /// [`call`](Self::call) with a request encoded already (copied into each packet).
    pub fn call_bytes(&mut self, ty: u16, req: &[u8]) -> Result<RxMsg, CallError> {
        let conn = self.conn;
        self.call_with(ty, Patience::Time, |dp, msg| dp.send_copy(conn, msg, req))
    }

    /// [`call`](Self::call) that counts receives instead of time: the request is sent again
    /// after `polls_per_try` receives without its reply, and `wait` runs before each receive
    /// (it lets an in-process server run, or sleeps): deterministic, for tests and fault
    /// runs on an in-process wire.
    pub fn call_polling<O: SendObject>(
        &mut self,
        ty: u16,
        req: &O,
        polls_per_try: u32,
        wait: &mut dyn FnMut(),
    ) -> Result<RxMsg, CallError> {
        let conn = self.conn;
        let patience = Patience::Polls(polls_per_try, wait);
        self.call_with(ty, patience, |dp, msg| dp.send_object(conn, msg, req))
    }

    /// [`call_polling`](Self::call_polling) with a request encoded already.
    pub fn call_bytes_polling(
        &mut self,
        ty: u16,
        req: &[u8],
        polls_per_try: u32,
        wait: &mut dyn FnMut(),
    ) -> Result<RxMsg, CallError> {
        let conn = self.conn;
        let patience = Patience::Polls(polls_per_try, wait);
        self.call_with(ty, patience, |dp, msg| dp.send_copy(conn, msg, req))
    }

    fn call_with(
        &mut self,
        ty: u16,
        mut patience: Patience<'_>,
        mut send: impl FnMut(&mut D, Msg) -> Result<(), SendError>,
    ) -> Result<RxMsg, CallError> {
        if self.table.len() > 0 {
            return Err(CallError::Busy);
        }
        let msg = self.ids.next(ty);
        self.stats.calls += 1;
        let mut last_send_error = None;
        for attempt in 0..self.policy.tries.max(1) {
            if attempt > 0 {
                self.stats.retries += 1;
            }
            match send(&mut self.dp, msg).and_then(|()| self.dp.flush()) {
                Ok(()) => last_send_error = None,
                // Counted as a try: the wait below is the backoff.
                Err(e) => last_send_error = Some(e),
            }
            let deadline = Instant::now() + self.policy.timeout;
            let mut polls = 0u32;
            loop {
                if let Patience::Polls(_, wait) = &mut patience {
                    wait();
                }
                if let Some(m) = self.receive_reply(msg) {
                    self.stats.replies += 1;
                    return match check_reply(&m, ty) {
                        Ok(()) => Ok(m),
                        Err(e) => {
                            self.stats.refused += matches!(e, CallError::Refused(_)) as u64;
                            Err(e)
                        }
                    };
                }
                polls += 1;
                let given_up = match patience {
                    Patience::Time => Instant::now() >= deadline,
                    Patience::Polls(n, _) => polls >= n.max(1),
                };
                if given_up {
                    break;
                }
            }
        }
        self.stats.timed_out += 1;
        Err(last_send_error.map_or(CallError::TimedOut, CallError::Send))
    }
}

/// How long a call waits for each try's reply.
enum Patience<'w> {
    /// The policy's timeout.
    Time,
    /// This many receives, each after `wait`.
    Polls(u32, &'w mut dyn FnMut()),
}

impl<D: Datapath> Client<D> {
    /// One receive: the reply to `msg` if it came (other messages are counted stale).
    fn receive_reply(&mut self, msg: Msg) -> Option<RxMsg> {
        let mut rx = std::mem::take(&mut self.rx);
        rx.clear();
        let _ = self.dp.recv_burst(&mut rx);
        self.dp.poll_completions();
        let mut found = None;
        for m in rx.drain(..) {
            if found.is_none() && m.msg.id == msg.id && m.msg.incarnation == msg.incarnation {
                found = Some(m);
            } else {
                self.stats.stale_replies += 1;
            }
        }
        self.rx = rx;
        found
    }
}
