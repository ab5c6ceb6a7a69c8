//! The server side of a generated service: the state its dispatcher keeps ([`Dispatcher`]: the
//! arena each reply is built in, how replies go out, what was counted) and the handle a method
//! answers through ([`Reply`]).
//!
//! A generated dispatcher routes on the framing header's message type with one `match`: each
//! arm opens the request as a view of the received buffer (only its header is checked; a
//! field is read, and checked, when the method asks for it), resets the arena and calls the
//! method with a [`Reply`]. A type no method has is answered with an error reply
//! ([`crate::RpcError`]) and counted; a request that does not open is refused
//! ([`Unanswered::Malformed`]) and counted by the server.
//!
//! A method marked exactly-once goes through the dispatcher's [`OnceTable`] first
//! ([`Dispatcher::once`]): a new request runs, and its [`Reply`] keeps the encoded reply (up to
//! [`KEPT_REPLY_LEN`] bytes) as the request's outcome; a retry (the same incarnation, id and
//! bytes) is answered with that reply again without running; a request that reuses an id for
//! other bytes is refused with the error reply ([`ErrorCode::IdReused`]).

use std::fmt;
use std::marker::PhantomData;

use cornflakes::{
    Arena, CFBytes, CFString, CornflakesObj, Datapath, PinnedMemory, RcBuf, RxMsg, SendError,
};

use crate::once::{Check, Fresh, Incoming, OnceStats, OnceTable, Window};
use crate::rpc_error::{ErrorCode, RpcError, ERROR_TYPE};
use crate::{AppCounters, Cornflakes, SendPath, Unanswered};

/// What a dispatcher has counted (the server counts received, replied and malformed requests
/// itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcCounters {
    /// Requests of a message type the service has no method for, answered with an error
    /// reply.
    pub unknown_methods: u64,
    /// The exactly-once table's counters (retries answered, outcomes recorded and evicted,
    /// reused ids refused).
    pub once: OnceStats,
}

impl AppCounters for RpcCounters {
    fn add(&mut self, o: &RpcCounters) {
        self.unknown_methods += o.unknown_methods;
        self.once.add(&o.once);
    }

    /// Written only when not zero, so a server whose clients only call its methods reports
    /// what it reported before it was a service.
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (key, n) in [
            ("unknown_methods", self.unknown_methods),
            ("retries_answered", self.once.hits),
            ("reused_ids_refused", self.once.refused),
        ] {
            if n > 0 {
                write!(f, " {key}={n}")?;
            }
        }
        Ok(())
    }

    fn parse_field(&mut self, key: &str, value: u64) -> bool {
        match key {
            "unknown_methods" => self.unknown_methods = value,
            "retries_answered" => self.once.hits = value,
            "reused_ids_refused" => self.once.refused = value,
            _ => return false,
        }
        true
    }
}

/// The longest encoded reply of an exactly-once method its table keeps for a retry; a longer
/// one is sent but not kept, and a retry of its request gets the error reply
/// [`ErrorCode::ReplyNotKept`] (it ran once; its reply is gone).
pub const KEPT_REPLY_LEN: usize = 64;

/// An exactly-once request's outcome as its table keeps it: the encoded reply, or that it was
/// longer than [`KEPT_REPLY_LEN`].
#[derive(Clone, Copy)]
pub struct KeptReply {
    /// Bytes of `bytes` used; `NOT_KEPT` for a reply too long to keep.
    len: u16,
    bytes: [u8; KEPT_REPLY_LEN],
}

impl KeptReply {
    const NOT_KEPT: u16 = u16::MAX;

    fn of<B: CornflakesObj>(reply: &B) -> KeptReply {
        let mut k = KeptReply {
            len: KeptReply::NOT_KEPT,
            bytes: [0; KEPT_REPLY_LEN],
        };
        if let Ok(n) = reply.serialize_into(&mut k.bytes) {
            k.len = n as u16;
        }
        k
    }

    /// The encoded reply, if it was kept.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.bytes.get(..usize::from(self.len))
    }
}

/// The state of a generated dispatcher besides the service: the arena each request's reply is
/// built in (reset before every method call), how replies go out, and its counters.
pub struct Dispatcher {
    arena: Arena,
    path: SendPath,
    counters: RpcCounters,
    /// The exactly-once methods' outcomes, made at their first request.
    once: Option<OnceTable<KeptReply>>,
    window: Window,
}

impl Dispatcher {
    /// Replies built on the datapath's pinned memory `mem` in configuration `mode` (its
    /// threshold given the hybrid one, `hybrid_threshold`, and its send path).
    pub fn new(mem: &PinnedMemory, mode: Cornflakes, hybrid_threshold: usize) -> Dispatcher {
        let arena = Arena::with_memory(mem).with_threshold(mode.threshold(hybrid_threshold));
        Dispatcher::with_arena(arena, mode.send_path())
    }

    /// Replies built in `arena` and sent by `path`.
    pub fn with_arena(arena: Arena, path: SendPath) -> Dispatcher {
        Dispatcher {
            arena,
            path,
            counters: RpcCounters::default(),
            once: None,
            window: Window::DEFAULT,
        }
    }

    /// The window of the exactly-once table (how many outcomes it keeps; `Window::DEFAULT`
    /// unless set here before the first request).
    pub fn with_once_window(mut self, window: Window) -> Dispatcher {
        self.window = window;
        self
    }

    /// The arena replies are built in (e.g. to set its limit).
    pub fn arena_mut(&mut self) -> &mut Arena {
        &mut self.arena
    }

    /// How replies go out.
    pub fn send_path(&self) -> SendPath {
        self.path
    }

    /// Counters so far.
    pub fn counters(&self) -> RpcCounters {
        RpcCounters {
            once: self.once.as_ref().map(OnceTable::stats).unwrap_or_default(),
            ..self.counters
        }
    }

    /// The reply handle for request `m` received on `dp`, with the arena reset.
    #[inline]
    pub fn reply<'r, D: Datapath, B>(&'r mut self, dp: &'r mut D, m: &'r RxMsg) -> Reply<'r, D, B> {
        self.arena.reset();
        Reply {
            dp,
            arena: &self.arena,
            rx: m,
            path: self.path,
            keep: Plain(()),
            _reply: PhantomData,
        }
    }

    /// Whether request `m` of an exactly-once method is to run: `Some` when it is new (run it,
    /// answering through [`reply_once`](Self::reply_once)); `None` when it was answered here:
    /// a retry gets its kept reply again (or [`ErrorCode::ReplyNotKept`]), a request that
    /// reuses an id for other bytes gets [`ErrorCode::IdReused`]. Neither runs.
    #[inline]
    pub fn once<D: Datapath>(
        &mut self,
        dp: &mut D,
        m: &RxMsg,
    ) -> Result<Option<Fresh>, Unanswered> {
        // The sender's address stands for a client without an incarnation.
        let Some(req) = Incoming::new(m.msg, m.data.as_slice(), || Some(m.peer)) else {
            return Err(Unanswered::Malformed("no client identity".to_owned()));
        };
        let window = self.window;
        let table = self.once.get_or_insert_with(|| OnceTable::new(window));
        match table.check(&req) {
            Check::Run(fresh) => Ok(Some(fresh)),
            Check::Answered(kept) => {
                match kept.bytes() {
                    Some(bytes) => dp.send_copy(m.conn, m.msg, bytes)?,
                    None => error_reply(dp, m, ErrorCode::ReplyNotKept)?,
                }
                Ok(None)
            }
            Check::Refused => {
                error_reply(dp, m, ErrorCode::IdReused)?;
                Ok(None)
            }
        }
    }

    /// The reply handle for request `m` of an exactly-once method that is to run (`fresh`,
    /// from [`once`](Self::once)): its reply is kept as the request's outcome when it is sent.
    #[inline]
    pub fn reply_once<'r, D: Datapath, B>(
        &'r mut self,
        dp: &'r mut D,
        m: &'r RxMsg,
        fresh: Fresh,
    ) -> Reply<'r, D, B, Kept<'r>> {
        let Dispatcher {
            arena,
            path,
            once,
            window,
            ..
        } = self;
        arena.reset();
        let table = once.get_or_insert_with(|| OnceTable::new(*window));
        Reply {
            dp,
            arena,
            rx: m,
            path: *path,
            keep: Kept { table, fresh },
            _reply: PhantomData,
        }
    }

    /// Answers request `m`, whose message type no method has, with an error reply
    /// ([`ErrorCode::UnknownMethod`]; same id and incarnation, message type
    /// [`ERROR_TYPE`]), and counts it.
    #[cold]
    #[inline(never)]
    pub fn unknown_method<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        self.counters.unknown_methods += 1;
        Ok(error_reply(dp, m, ErrorCode::UnknownMethod)?)
    }
}

/// Sends the error reply `code` to request `m`: message type [`ERROR_TYPE`], the request's id
/// and incarnation.
#[cold]
#[inline(never)]
fn error_reply<D: Datapath>(dp: &mut D, m: &RxMsg, code: ErrorCode) -> Result<(), SendError> {
    let body = RpcError {
        code,
        method: m.msg.ty,
    }
    .encode();
    let mut msg = m.msg;
    msg.ty = ERROR_TYPE;
    dp.send_copy(m.conn, msg, &body)
}

/// Proof that a method sent its reply: only [`Reply::send`] and [`Reply::send_or`] make one,
/// so a method that returns `Ok` has answered.
#[derive(Debug)]
#[must_use]
pub struct Replied(());

/// What a [`Reply`] does with its reply besides sending it: nothing ([`Plain`], every method
/// but the exactly-once ones) or keep it as the request's outcome ([`Kept`]). A type, not a
/// flag checked per reply, so a plain method's reply path has no exactly-once code in it.
pub trait Keep: sealed::Sealed {
    /// Called once, with the reply the request answers, before it is sent.
    fn keep<B: CornflakesObj>(self, reply: &B);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Plain {}
    impl Sealed for super::Kept<'_> {}
}

/// A reply handle's [`Keep`] for a method that is not exactly-once: the reply is only sent.
#[derive(Debug)]
pub struct Plain(());

impl Keep for Plain {
    #[inline(always)]
    fn keep<B: CornflakesObj>(self, _reply: &B) {}
}

/// A reply handle's [`Keep`] for a request of an exactly-once method that is to run: its reply
/// is kept in the dispatcher's exactly-once table under the request's key, so a retry gets it
/// again ([`Dispatcher::reply_once`]).
pub struct Kept<'r> {
    table: &'r mut OnceTable<KeptReply>,
    fresh: Fresh,
}

impl Keep for Kept<'_> {
    #[inline]
    fn keep<B: CornflakesObj>(self, reply: &B) {
        self.table.record(self.fresh, KeptReply::of(reply));
    }
}

/// How a method answers one request: it builds the reply `B` in [`arena`](Self::arena) (the
/// request's arena, reset for it) and [`send`](Self::send)s it, once, by the dispatcher's send
/// path (serialize-and-send, or a scatter-gather array first). The reply goes to the request's
/// sender with the request's message id, type and incarnation. An exactly-once method's handle
/// is a `Reply<'r, D, B, Kept<'r>>`: its reply is also kept as the request's outcome.
///
/// A value the reply takes from a store as a pinned buffer (`CFBytes::from_rcbuf_ref`) goes
/// out by reference when at least the arena's threshold long; a value read from the request
/// goes out as a slice of the received packet ([`bytes`](Self::bytes)).
pub struct Reply<'r, D, B, K = Plain> {
    dp: &'r mut D,
    arena: &'r Arena,
    rx: &'r RxMsg,
    path: SendPath,
    /// What becomes of the reply besides being sent.
    keep: K,
    _reply: PhantomData<fn(&B)>,
}

impl<'r, D: Datapath, B: CornflakesObj, K: Keep> Reply<'r, D, B, K> {
    /// The arena to build the reply in.
    #[inline]
    pub fn arena(&self) -> &'r Arena {
        self.arena
    }

    /// The request as received (its sender, connection and framing header).
    #[inline]
    pub fn request(&self) -> &'r RxMsg {
        self.rx
    }

    /// A bytes value read from the request (by its view), for the reply: a slice of the
    /// received packet, referenced when at least the arena's threshold long, else copied
    /// when the reply is sent.
    #[inline]
    pub fn bytes(&self, data: &'r [u8]) -> CFBytes<'r> {
        CFBytes::from_packet(&self.rx.data, data, self.arena)
    }

    /// The received packet the request's view reads (for
    /// [`LeafList::extend_from_packet`](cornflakes::LeafList::extend_from_packet), which echoes
    /// a list read through the view).
    #[inline]
    pub fn packet(&self) -> &'r RcBuf {
        &self.rx.data
    }

    /// A string read from the request, for the reply (as [`bytes`](Self::bytes)).
    #[inline]
    pub fn string(&self, s: &'r str) -> CFString<'r> {
        CFString::from_packet(&self.rx.data, s, self.arena)
    }

    /// The longest reply the datapath sends.
    #[inline]
    pub fn max_message_len(&self) -> usize {
        self.dp.max_message_len()
    }

    /// Sends `reply` (kept first, for an exactly-once request: a reply that then fails to go
    /// out was still decided, and a retry gets it).
    #[inline]
    pub fn send(self, reply: &B) -> Result<Replied, Unanswered> {
        self.keep.keep(reply);
        self.path.send(self.dp, self.rx.conn, self.rx.msg, reply)?;
        Ok(Replied(()))
    }

    /// Sends `reply`, or, when it is longer than the datapath sends, the reply `too_large`
    /// builds instead (e.g. the same reply with a status saying so and no values).
    #[inline]
    pub fn send_or(
        self,
        reply: &B,
        too_large: impl FnOnce(&'r Arena) -> B,
    ) -> Result<Replied, Unanswered> {
        let (conn, msg) = (self.rx.conn, self.rx.msg);
        if reply.sizes().total() <= self.dp.max_message_len() {
            match self.path.send(self.dp, conn, msg, reply) {
                Err(SendError::TooLarge { .. }) => {}
                r => {
                    self.keep.keep(reply);
                    r?;
                    return Ok(Replied(()));
                }
            }
        }
        // Too long for the datapath: the replacement is what the request answers.
        let smaller = too_large(self.arena);
        self.keep.keep(&smaller);
        self.path.send(self.dp, conn, msg, &smaller)?;
        Ok(Replied(()))
    }
}
