//! A closed-loop client that retries: one request at a time, sent again under the same
//! incarnation and request id when no reply came back in time, so the server's exactly-once
//! table (`cornflakes_rpc::once`) answers a retried write with its first outcome instead of
//! running it again. Its ids come from the process's identity (`cornflakes_rpc::ids`): a
//! caller made after a reconnect, or a second caller of the process, never reuses an id, and
//! a retry sent on a new connection is still recognised. The load generator's clients (open
//! loop, for measurement) never retry.

use cornflakes::{Arena, ConnId, Datapath};
use cornflakes_rpc::{Client, ClientIds};

use crate::cf;
use crate::client::{decode_reply, encode_request};
use crate::ops::{Op, OpKind, Reply};
use crate::serialization::Serialization;

/// How a [`Caller`] waits and retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Polls of the datapath without the reply before the request is sent again.
    pub polls_per_try: u32,
    /// Sends of one request in all (the first and the retries).
    pub tries: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            polls_per_try: 4,
            tries: 8,
        }
    }
}

/// What a [`Caller`] has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Requests called.
    pub calls: u64,
    /// Requests sent again (same id).
    pub retries: u64,
    /// Requests given up on after every try (the outcome is unknown: a write may or may not
    /// have run, once).
    pub gave_up: u64,
    /// Replies to an earlier request or a second copy of a reply, ignored.
    pub stale_replies: u64,
    /// Replies that did not decode, or error replies.
    pub bad_replies: u64,
}

/// A retrying client on one connection of datapath `D`: the runtime client of the generated
/// services (`cornflakes_rpc::Client`: the identity, the retries under one id, the matching of
/// replies), sending each serialization's encoding of the operation.
pub struct Caller<D: Datapath> {
    client: Client<D>,
    ser: Serialization,
    policy: RetryPolicy,
    arena: Arena,
    buf: Vec<u8>,
    bad_replies: u64,
}

impl<D: Datapath> Caller<D> {
    /// A client of the server on `conn`, speaking `ser`, with the process's identity
    /// ([`ClientIds::process`]).
    pub fn new(dp: D, conn: ConnId, ser: Serialization, policy: RetryPolicy) -> Caller<D> {
        Caller::with_ids(dp, conn, ser, policy, ClientIds::process())
    }

    /// [`Caller::new`] with the identity `ids`: the same incarnation as an earlier caller
    /// acts as that process reconnecting, another as another process.
    pub fn with_ids(
        dp: D,
        conn: ConnId,
        ser: Serialization,
        policy: RetryPolicy,
        ids: ClientIds,
    ) -> Caller<D> {
        let tries = cornflakes_rpc::RetryPolicy {
            tries: policy.tries,
            ..cornflakes_rpc::RetryPolicy::default()
        };
        Caller {
            client: Client::new(dp, conn, tries).with_ids(ids),
            ser,
            policy,
            arena: Arena::new(),
            buf: Vec::new(),
            bad_replies: 0,
        }
    }

    /// Counters.
    pub fn stats(&self) -> CallStats {
        let s = self.client.stats();
        CallStats {
            calls: s.calls,
            retries: s.retries,
            gave_up: s.timed_out,
            stale_replies: s.stale_replies,
            bad_replies: self.bad_replies + s.refused,
        }
    }

    /// The datapath.
    pub fn datapath(&mut self) -> &mut D {
        self.client.datapath_mut()
    }

    /// The identity its requests carry.
    pub fn ids(&self) -> &ClientIds {
        self.client.ids()
    }

    /// Sends `op` under a new id and waits for its reply, sending it again under the same
    /// incarnation and id after every [`RetryPolicy::polls_per_try`] polls without one. `wait`
    /// runs before each poll (e.g. lets an in-process server run, or sleeps). `None` when
    /// every try went unanswered (or the reply did not decode).
    pub fn call(&mut self, op: &Op, wait: &mut dyn FnMut()) -> Option<Reply> {
        let kind = OpKind::of(op);
        let (ty, polls) = (kind.msg_type(), self.policy.polls_per_try);
        let got = if self.ser.is_cornflakes() {
            self.arena.reset();
            cf::Request::build(op, 0, &self.arena).call_polling(&mut self.client, polls, wait)
        } else {
            encode_request(self.ser, op, 0, &mut self.buf);
            self.client.call_bytes_polling(ty, &self.buf, polls, wait)
        };
        let m = got.ok()?;
        match decode_reply(self.ser, kind, &m.data) {
            Ok((_, r)) => Some(r),
            Err(_) => {
                self.bad_replies += 1;
                None
            }
        }
    }
}
