//! A closed-loop client that retries: one request at a time, sent again under the same
//! incarnation and request id when no reply came back in time, so the server's exactly-once
//! table (`cornflakes_rpc::once`) answers a retried write with its first outcome instead of
//! running it again. Its ids come from the process's identity (`cornflakes_rpc::ids`): a
//! caller made after a reconnect, or a second caller of the process, never reuses an id, and
//! a retry sent on a new connection is still recognised. The load generator's clients (open
//! loop, for measurement) never retry.

use cornflakes::{Arena, ConnId, Datapath, RxMsg};
use cornflakes_rpc::ClientIds;

use crate::client::{decode_reply, send_op};
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
    /// Replies that did not decode.
    pub bad_replies: u64,
}

/// A retrying client on one connection of datapath `D`.
pub struct Caller<D: Datapath> {
    dp: D,
    conn: ConnId,
    ser: Serialization,
    policy: RetryPolicy,
    ids: ClientIds,
    arena: Arena,
    buf: Vec<u8>,
    rx: Vec<RxMsg>,
    stats: CallStats,
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
        Caller {
            dp,
            conn,
            ser,
            policy,
            ids,
            arena: Arena::new(),
            buf: Vec::new(),
            rx: Vec::new(),
            stats: CallStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> CallStats {
        self.stats
    }

    /// The datapath.
    pub fn datapath(&mut self) -> &mut D {
        &mut self.dp
    }

    /// The identity its requests carry.
    pub fn ids(&self) -> &ClientIds {
        &self.ids
    }

    /// Sends `op` under a new id and waits for its reply, sending it again under the same
    /// incarnation and id after every [`RetryPolicy::polls_per_try`] polls without one. `wait`
    /// runs before each poll (e.g. lets an in-process server run, or sleeps). `None` when
    /// every try went unanswered.
    pub fn call(&mut self, op: &Op, wait: &mut dyn FnMut()) -> Option<Reply> {
        let kind = OpKind::of(op);
        let msg = self.ids.next(kind.msg_type());
        self.stats.calls += 1;
        for attempt in 0..self.policy.tries {
            if attempt > 0 {
                self.stats.retries += 1;
            }
            let sent = send_op(
                &mut self.dp,
                self.conn,
                msg,
                self.ser,
                op,
                &mut self.arena,
                &mut self.buf,
            );
            if sent.is_err() || self.dp.flush().is_err() {
                continue; // counted as a try: the wait below is the backoff
            }
            for _ in 0..self.policy.polls_per_try {
                wait();
                self.rx.clear();
                let _ = self.dp.recv_burst(&mut self.rx);
                self.dp.poll_completions();
                let mut reply = None;
                for m in self.rx.drain(..) {
                    let ours = m.msg.id == msg.id && m.msg.incarnation == msg.incarnation;
                    if !ours || reply.is_some() {
                        self.stats.stale_replies += 1;
                        continue;
                    }
                    match decode_reply(self.ser, kind, &m.data) {
                        Ok((_, r)) => reply = Some(r),
                        Err(_) => self.stats.bad_replies += 1,
                    }
                }
                if reply.is_some() {
                    return reply;
                }
            }
        }
        self.stats.gave_up += 1;
        None
    }
}
