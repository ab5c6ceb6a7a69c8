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

use std::fmt;
use std::marker::PhantomData;

use cornflakes::{
    Arena, CFBytes, CFString, CornflakesObj, Datapath, PinnedMemory, RcBuf, RxMsg, SendError,
};

use crate::rpc_error::{ErrorCode, RpcError, ERROR_TYPE};
use crate::{AppCounters, Cornflakes, SendPath, Unanswered};

/// What a dispatcher has counted (the server counts received, replied and malformed requests
/// itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcCounters {
    /// Requests of a message type the service has no method for, answered with an error
    /// reply.
    pub unknown_methods: u64,
}

impl AppCounters for RpcCounters {
    fn add(&mut self, o: &RpcCounters) {
        self.unknown_methods += o.unknown_methods;
    }

    /// Written only when not zero, so a server whose clients only call its methods reports
    /// what it reported before it was a service.
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unknown_methods > 0 {
            write!(f, " unknown_methods={}", self.unknown_methods)?;
        }
        Ok(())
    }

    fn parse_field(&mut self, key: &str, value: u64) -> bool {
        match key {
            "unknown_methods" => self.unknown_methods = value,
            _ => return false,
        }
        true
    }
}

/// The state of a generated dispatcher besides the service: the arena each request's reply is
/// built in (reset before every method call), how replies go out, and its counters.
pub struct Dispatcher {
    arena: Arena,
    path: SendPath,
    counters: RpcCounters,
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
        }
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
        self.counters
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
        let body = RpcError {
            code: ErrorCode::UnknownMethod,
            method: m.msg.ty,
        }
        .encode();
        let mut msg = m.msg;
        msg.ty = ERROR_TYPE;
        Ok(dp.send_copy(m.conn, msg, &body)?)
    }
}

/// Proof that a method sent its reply: only [`Reply::send`] and [`Reply::send_or`] make one,
/// so a method that returns `Ok` has answered.
#[derive(Debug)]
#[must_use]
pub struct Replied(());

/// How a method answers one request: it builds the reply `B` in [`arena`](Self::arena) (the
/// request's arena, reset for it) and [`send`](Self::send)s it, once, by the dispatcher's send
/// path (serialize-and-send, or a scatter-gather array first). The reply goes to the request's
/// sender with the request's message id, type and incarnation.
///
/// A value the reply takes from a store as a pinned buffer (`CFBytes::from_rcbuf_ref`) goes
/// out by reference when at least the arena's threshold long; a value read from the request
/// goes out as a slice of the received packet ([`bytes`](Self::bytes)).
pub struct Reply<'r, D, B> {
    dp: &'r mut D,
    arena: &'r Arena,
    rx: &'r RxMsg,
    path: SendPath,
    _reply: PhantomData<fn(&B)>,
}

impl<'r, D: Datapath, B: CornflakesObj> Reply<'r, D, B> {
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
    /// [`LeafList::append_from_packet`](cornflakes::LeafList::append_from_packet), which echoes
    /// a list element by element).
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

    /// Sends `reply`.
    #[inline]
    pub fn send(self, reply: &B) -> Result<Replied, Unanswered> {
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
        let sent = if reply.sizes().total() > self.dp.max_message_len() {
            Err(SendError::TooLarge {
                len: reply.sizes().total(),
                max: self.dp.max_message_len(),
            })
        } else {
            self.path.send(self.dp, conn, msg, reply)
        };
        match sent {
            Err(SendError::TooLarge { .. }) => {
                self.path.send(self.dp, conn, msg, &too_large(self.arena))?;
            }
            r => r?,
        }
        Ok(Replied(()))
    }
}
