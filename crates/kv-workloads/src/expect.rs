//! What a key-value store must answer to a workload's requests: the checker both the KV
//! store's benches and the Redis bench verify replies with, whatever the wire format.
//!
//! [`Expected`] knows every state each key of a run passes through (its loaded list, then the
//! list after each write of the run, in request order). A reply is decoded by the caller into
//! anything that implements [`Answer`] (an outcome and the values) and checked two ways:
//!
//! - [`Expected::check`]: right in *some* state the run passes through. For clients whose
//!   requests to one key may be reordered on the way (several client threads): a read may see
//!   a write early or late, but never a value that was not stored, a wrong element, or a
//!   missing key that exists (and vice versa).
//! - [`Expected::check_now`]: right in the state the key holds *now*, as a [`Current`] tracks
//!   it from the writes applied to it in the order the server answered them
//!   ([`Expected::apply_to`]). For a checker that sees one server core's replies in order: a
//!   stale value is caught too. A write whose reply never came (it timed out) may or may not
//!   have happened ([`Expected::unanswered`]): the key then accepts either state until a read
//!   or a write settles which.
//!
//! Writes must succeed (`Ok`; a delete of an absent key answers `NotFound`). Values are
//! remembered as 64-bit hashes, so checking a reply hashes only the reply.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{Request, Workload};

/// A reply's outcome, as far as the checker tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done (a read found its key and element).
    Ok,
    /// The key is absent.
    NotFound,
    /// The list is shorter than the element asked for.
    BadIndex,
    /// Any other failure (never right).
    Failed,
}

/// A decoded reply, in whatever serialization it came.
pub trait Answer {
    /// The request's outcome (for a multi-key read, its first failure).
    fn outcome(&self) -> Outcome;
    /// The values returned: one for a single-key read, one per key for a multi-key read (empty
    /// where that key failed), the whole list for a list read, none for a write.
    fn values(&self) -> &[Vec<u8>];
    /// A multi-key read's per-key outcomes: how many there are.
    fn key_outcomes(&self) -> usize;
    /// A multi-key read's outcome for key `i` (`i < key_outcomes()`).
    fn key_outcome(&self, i: usize) -> Outcome;
}

/// The loaded list of a key (`None`: not loaded), as a workload recomputes it.
pub type InitialValue = Box<dyn Fn(&str) -> Option<Vec<Vec<u8>>> + Send + Sync>;

/// A key's list as the checker remembers it: one hash per value.
type ListState = Vec<u64>;

/// A value as the checker remembers it: [`loadgen::payload_hash`], which tells apart any two
/// values that differ in one 8-byte word and costs a fraction of SipHash (a CDN reply's
/// check was mostly SipHash over its 8 KiB value).
fn hash(v: &[u8]) -> u64 {
    loadgen::payload_hash(v)
}

fn list_state(vals: &[Vec<u8>]) -> ListState {
    vals.iter().map(|v| hash(v)).collect()
}

/// What the store must hold. See the module's documentation.
pub struct Expected {
    /// Longest value a reply of the run may carry (loaded or written), bytes.
    max_value: usize,
    written: HashMap<String, Vec<Option<ListState>>>,
    initial: InitialValue,
}

/// How a checker looks a key's list up: calls the closure with each state it accepts and
/// says whether one passed.
type States<'a> = &'a dyn Fn(&str, &mut dyn FnMut(Option<&ListState>) -> bool) -> bool;

/// What a write does to one key's list.
enum Effect {
    /// The list becomes this (`None`: the key is removed).
    Set(Option<ListState>),
    /// This element is appended.
    Append(u64),
}

impl Effect {
    /// The list after this effect on `before`.
    fn on(&self, before: Option<&ListState>) -> Option<ListState> {
        match self {
            Effect::Set(l) => l.clone(),
            Effect::Append(h) => {
                let mut l = before.cloned().unwrap_or_default();
                l.push(*h);
                Some(l)
            }
        }
    }
}

/// The effects of `op` on each key it writes (none for a read).
fn effects(op: &Request) -> Vec<(&str, Effect)> {
    match op {
        Request::Put { key, val } => vec![(key.as_str(), Effect::Set(Some(vec![hash(val)])))],
        Request::PutM { keys, vals } if keys.len() == vals.len() => keys
            .iter()
            .zip(vals)
            .map(|(k, v)| (k.as_str(), Effect::Set(Some(vec![hash(v)]))))
            .collect(),
        Request::Append { key, val } => vec![(key.as_str(), Effect::Append(hash(val)))],
        Request::Delete { key } => vec![(key.as_str(), Effect::Set(None))],
        _ => Vec::new(),
    }
}

/// The store's contents as an in-order checker tracks them: the lists of the keys written so
/// far (the others hold what was loaded), and the keys a write left uncertain. See
/// [`Expected::check_now`].
#[derive(Debug, Default, Clone)]
pub struct Current {
    lists: HashMap<String, Option<ListState>>,
    /// Keys whose state is one of several: a write to them was never answered.
    maybe: HashMap<String, Vec<Option<ListState>>>,
}

impl Current {
    /// Keys whose state a write that was never answered left uncertain.
    pub fn uncertain(&self) -> usize {
        self.maybe.len()
    }
}

impl Expected {
    /// The states of a store loaded as `initial` says, after the writes of `ops` in order.
    pub fn new(initial: InitialValue, ops: &[Request]) -> Self {
        let mut e = Expected {
            max_value: 0,
            written: HashMap::new(),
            initial,
        };
        for op in ops {
            for k in op.keys() {
                if !e.written.contains_key(k) {
                    let init = (e.initial)(k);
                    let longest = init.iter().flatten().map(Vec::len).max().unwrap_or(0);
                    e.max_value = e.max_value.max(longest);
                    let first = init.map(|v| list_state(&v));
                    e.written.insert(k.to_owned(), vec![first]);
                }
            }
        }
        for op in ops {
            e.apply(op);
        }
        e
    }

    /// The states of a workload's store after the writes of `ops`.
    pub fn for_workload(w: Arc<dyn Workload>, ops: &[Request]) -> Self {
        Expected::new(Box::new(move |k| w.initial_value(k)), ops)
    }

    fn push(&mut self, key: &str, effect: &Effect) {
        if !self.written.contains_key(key) {
            let first = (self.initial)(key).map(|v| list_state(&v));
            self.written.insert(key.to_owned(), vec![first]);
        }
        let states = self.written.get_mut(key).expect("inserted above");
        let next = effect.on(states.last().and_then(Option::as_ref));
        if !states.contains(&next) {
            states.push(next);
        }
    }

    /// The longest value a reply of the run may carry (loaded or written), bytes.
    pub fn max_value_len(&self) -> usize {
        self.max_value
    }

    /// Records the effect of a write.
    pub fn apply(&mut self, op: &Request) {
        for v in match op {
            Request::Put { val, .. } | Request::Append { val, .. } => std::slice::from_ref(val),
            Request::PutM { vals, .. } => vals.as_slice(),
            _ => &[],
        } {
            self.max_value = self.max_value.max(v.len());
        }
        for (key, effect) in effects(op) {
            self.push(key, &effect);
        }
    }

    fn any_state(&self, key: &str, f: &mut dyn FnMut(Option<&ListState>) -> bool) -> bool {
        match self.written.get(key) {
            Some(states) => states.iter().any(|s| f(s.as_ref())),
            None => f(self.loaded(key).as_ref()),
        }
    }

    /// The loaded list of `key`.
    fn loaded(&self, key: &str) -> Option<ListState> {
        match self.written.get(key) {
            Some(states) => states[0].clone(),
            None => (self.initial)(key).map(|v| list_state(&v)),
        }
    }

    /// Whether `(outcome, value)` is a correct answer for element `index` of `key`.
    fn element_ok(
        states: States<'_>,
        key: &str,
        index: usize,
        outcome: Outcome,
        val: Option<&[u8]>,
    ) -> bool {
        let h = val.map(hash);
        states(key, &mut |s| match (s, outcome, h) {
            (None, Outcome::NotFound, _) => true,
            (Some(l), Outcome::Ok, Some(h)) => l.get(index) == Some(&h),
            (Some(l), Outcome::BadIndex, _) => index >= l.len(),
            _ => false,
        })
    }

    /// Whether `reply` is a correct answer to `op` in some state the store passes through
    /// during the run (see [`Expected`]: concurrent clients may reorder a read and a write).
    pub fn check(&self, op: &Request, reply: &dyn Answer) -> bool {
        Self::check_in(&|k, f| self.any_state(k, f), op, reply)
    }

    /// The state `now` holds for `key` (with its candidates when uncertain), given to `f`.
    fn now_state(
        &self,
        now: &Current,
        key: &str,
        f: &mut dyn FnMut(Option<&ListState>) -> bool,
    ) -> bool {
        if let Some(c) = now.maybe.get(key) {
            return c.iter().any(|s| f(s.as_ref()));
        }
        match now.lists.get(key) {
            Some(l) => f(l.as_ref()),
            None => f(self.loaded(key).as_ref()),
        }
    }

    /// Whether `reply` is a correct answer to `op` in the state `now` holds: the loaded
    /// contents after the writes applied to `now` in order ([`Expected::apply_to`]). For a
    /// checker that sees one core's replies in the order the core handled the requests. A
    /// right read of a key left uncertain ([`Expected::unanswered`]) settles which state it
    /// is in, as far as the reply tells.
    pub fn check_now(&self, now: &mut Current, op: &Request, reply: &dyn Answer) -> bool {
        let right = Self::check_in(&|k, f| self.now_state(now, k, f), op, reply);
        if !right || op.is_write() || now.maybe.is_empty() {
            return right;
        }
        for key in op.keys() {
            let Some(candidates) = now.maybe.get(key).cloned() else {
                continue;
            };
            let kept: Vec<Option<ListState>> = candidates
                .into_iter()
                .filter(|c| {
                    Self::check_in(
                        &|k, f| {
                            if k == key {
                                f(c.as_ref())
                            } else {
                                self.now_state(now, k, f)
                            }
                        },
                        op,
                        reply,
                    )
                })
                .collect();
            if let [only] = kept.as_slice() {
                now.lists.insert(key.to_owned(), only.clone());
                now.maybe.remove(key);
            } else {
                now.maybe.insert(key.to_owned(), kept);
            }
        }
        right
    }

    /// Applies the write `op` (if it is one) to `now`, as the store does.
    pub fn apply_to(&self, now: &mut Current, op: &Request) {
        for (key, effect) in effects(op) {
            if let Some(c) = now.maybe.remove(key) {
                let mut next: Vec<Option<ListState>> = Vec::new();
                for s in c {
                    let n = effect.on(s.as_ref());
                    if !next.contains(&n) {
                        next.push(n);
                    }
                }
                if next.len() > 1 {
                    now.maybe.insert(key.to_owned(), next);
                    continue;
                }
                now.lists.insert(key.to_owned(), next.pop().flatten());
                continue;
            }
            let before = match now.lists.get(key) {
                Some(l) => l.clone(),
                None => self.loaded(key),
            };
            now.lists.insert(key.to_owned(), effect.on(before.as_ref()));
        }
    }

    /// Records that the write `op` (if it is one) was sent but never answered: the server may
    /// or may not have done it, so each key it writes holds its state before or after it
    /// until a read or another write settles which.
    pub fn unanswered(&self, now: &mut Current, op: &Request) {
        for (key, effect) in effects(op) {
            let before: Vec<Option<ListState>> = match now.maybe.get(key) {
                Some(c) => c.clone(),
                None => vec![match now.lists.get(key) {
                    Some(l) => l.clone(),
                    None => self.loaded(key),
                }],
            };
            let mut all = before.clone();
            for s in &before {
                let n = effect.on(s.as_ref());
                if !all.contains(&n) {
                    all.push(n);
                }
            }
            if all.len() > 1 {
                now.maybe.insert(key.to_owned(), all);
            }
        }
    }

    fn check_in(states: States<'_>, op: &Request, reply: &dyn Answer) -> bool {
        let vals = reply.values();
        let first = vals.first().map(Vec::as_slice);
        let outcome = reply.outcome();
        match op {
            Request::Get { key } => {
                vals.len() <= 1 && Self::element_ok(states, key, 0, outcome, first)
            }
            Request::GetFromList { key, index } => {
                vals.len() <= 1 && Self::element_ok(states, key, *index as usize, outcome, first)
            }
            Request::GetList { key } => {
                let got = list_state(vals);
                states(key, &mut |s| match (s, outcome) {
                    (None, Outcome::NotFound) => true,
                    (Some(l), Outcome::Ok) => *l == got,
                    _ => false,
                })
            }
            Request::GetM { keys } => {
                let n = reply.key_outcomes();
                n == keys.len()
                    && vals.len() == keys.len()
                    && outcome
                        == (0..n)
                            .map(|i| reply.key_outcome(i))
                            .find(|s| *s != Outcome::Ok)
                            .unwrap_or(Outcome::Ok)
                    && keys.iter().zip(vals).enumerate().all(|(i, (k, v))| {
                        let s = reply.key_outcome(i);
                        let v = (s == Outcome::Ok).then_some(v.as_slice());
                        Self::element_ok(states, k, 0, s, v)
                    })
            }
            Request::Delete { key } => match outcome {
                Outcome::Ok => states(key, &mut |s| s.is_some()),
                Outcome::NotFound => states(key, &mut |s| s.is_none()),
                _ => false,
            },
            Request::Put { .. } | Request::PutM { .. } | Request::Append { .. } => {
                outcome == Outcome::Ok && vals.is_empty()
            }
        }
    }
}

/// A decoded reply as plain data: for decoders with no reply type of their own (the Redis
/// bench's RESP and object replies), and for tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The outcome (for a multi-key read, its first failure).
    pub outcome: Outcome,
    /// The values (see [`Answer::values`]).
    pub vals: Vec<Vec<u8>>,
    /// A multi-key read's per-key outcomes (empty otherwise).
    pub outcomes: Vec<Outcome>,
}

impl Reply {
    /// A reply of `outcome` with `vals`.
    pub fn new(outcome: Outcome, vals: Vec<Vec<u8>>) -> Reply {
        Reply {
            outcome,
            vals,
            outcomes: Vec::new(),
        }
    }
}

impl Answer for Reply {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn values(&self) -> &[Vec<u8>] {
        &self.vals
    }
    fn key_outcomes(&self) -> usize {
        self.outcomes.len()
    }
    fn key_outcome(&self, i: usize) -> Outcome {
        self.outcomes[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(ops: &[Request]) -> Expected {
        Expected::new(
            Box::new(|k: &str| match k {
                "a" => Some(vec![b"a0".to_vec()]),
                "l" => Some(vec![b"x".to_vec(), b"y".to_vec()]),
                _ => None,
            }),
            ops,
        )
    }

    fn reply(outcome: Outcome, vals: &[&[u8]]) -> Reply {
        Reply::new(outcome, vals.iter().map(|v| v.to_vec()).collect())
    }

    fn get(k: &str) -> Request {
        Request::Get { key: k.into() }
    }

    fn put(k: &str, v: &[u8]) -> Request {
        Request::Put {
            key: k.into(),
            val: v.to_vec(),
        }
    }

    #[test]
    fn wrong_values_statuses_and_elements_are_rejected() {
        let e = expected(&[get("a"), put("a", b"a1")]);
        // Before or after the run's put: both correct.
        assert!(e.check(&get("a"), &reply(Outcome::Ok, &[b"a0"])));
        assert!(e.check(&get("a"), &reply(Outcome::Ok, &[b"a1"])));
        assert!(!e.check(&get("a"), &reply(Outcome::Ok, &[b"a2"])));
        assert!(!e.check(&get("a"), &reply(Outcome::NotFound, &[])));
        assert!(e.check(&put("a", b"a1"), &reply(Outcome::Ok, &[])));
        assert!(!e.check(&put("a", b"a1"), &reply(Outcome::Failed, &[])));
        assert!(e.check(&get("zz"), &reply(Outcome::NotFound, &[])));
        assert!(!e.check(&get("zz"), &reply(Outcome::Ok, &[b""])));
        let el = |i| Request::GetFromList {
            key: "l".into(),
            index: i,
        };
        assert!(e.check(&el(1), &reply(Outcome::Ok, &[b"y"])));
        assert!(!e.check(&el(0), &reply(Outcome::Ok, &[b"y"])));
        assert!(e.check(&el(2), &reply(Outcome::BadIndex, &[])));
        assert!(!e.check(&el(1), &reply(Outcome::BadIndex, &[])));
        let list = Request::GetList { key: "l".into() };
        assert!(e.check(&list, &reply(Outcome::Ok, &[b"x", b"y"])));
        assert!(!e.check(&list, &reply(Outcome::Ok, &[b"y", b"x"])));
        let getm = Request::GetM {
            keys: vec!["a".into(), "zz".into()],
        };
        let mut r = reply(Outcome::NotFound, &[b"a0", b""]);
        r.outcomes = vec![Outcome::Ok, Outcome::NotFound];
        assert!(e.check(&getm, &r));
        r.outcome = Outcome::Ok;
        assert!(
            !e.check(&getm, &r),
            "overall status must be the first failure"
        );
    }

    #[test]
    fn in_order_a_read_must_see_the_value_the_key_holds_now() {
        let e = expected(&[put("a", b"a1"), put("a", b"a2")]);
        let mut now = Current::default();
        // Loaded: only a0 is right now, though the run's other states are right for `check`.
        assert!(e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a0"])));
        assert!(!e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a1"])));
        assert!(e.check(&get("a"), &reply(Outcome::Ok, &[b"a1"])));
        e.apply_to(&mut now, &put("a", b"a1"));
        assert!(e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a1"])));
        assert!(
            !e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a0"])),
            "a stale value is wrong in order"
        );
        // Appends grow the list each time they are applied (a request set sent in cycles).
        let app = Request::Append {
            key: "l".into(),
            val: b"z".to_vec(),
        };
        let list = Request::GetList { key: "l".into() };
        e.apply_to(&mut now, &app);
        e.apply_to(&mut now, &app);
        assert!(e.check_now(
            &mut now,
            &list,
            &reply(Outcome::Ok, &[b"x", b"y", b"z", b"z"])
        ));
        assert!(!e.check_now(&mut now, &list, &reply(Outcome::Ok, &[b"x", b"y", b"z"])));
        let del = Request::Delete { key: "a".into() };
        assert!(e.check_now(&mut now, &del, &reply(Outcome::Ok, &[])));
        e.apply_to(&mut now, &del);
        assert!(e.check_now(&mut now, &get("a"), &reply(Outcome::NotFound, &[])));
        assert!(!e.check_now(&mut now, &del, &reply(Outcome::Ok, &[])));
    }

    #[test]
    fn an_unanswered_write_leaves_both_states_until_a_read_settles_it() {
        let e = expected(&[put("a", b"a1"), put("a", b"a2")]);
        let mut now = Current::default();
        e.unanswered(&mut now, &put("a", b"a1"));
        assert_eq!(now.uncertain(), 1);
        assert!(!e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a2"])));
        assert_eq!(now.uncertain(), 1, "a wrong read settles nothing");
        assert!(e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a1"])));
        assert_eq!(now.uncertain(), 0, "the read said the write happened");
        assert!(
            !e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a0"])),
            "once settled, the state before it is stale"
        );
        // Settled the other way; and a write settles an uncertain key by itself.
        e.unanswered(&mut now, &put("a", b"a2"));
        assert!(e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a1"])));
        assert!(!e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a2"])));
        e.unanswered(&mut now, &put("a", b"a2"));
        e.apply_to(&mut now, &put("a", b"a1"));
        assert_eq!(now.uncertain(), 0);
        assert!(!e.check_now(&mut now, &get("a"), &reply(Outcome::Ok, &[b"a2"])));
    }

    /// A store that answers a run's requests, honestly or lying in one way.
    #[derive(Clone, Copy, PartialEq)]
    enum Server {
        Honest,
        /// Acknowledges puts without doing them: reads return stale values.
        DropsPuts,
        /// Flips a byte of every value it returns.
        Corrupts,
    }

    fn serve(server: Server, ops: &[Request]) -> Vec<Reply> {
        let mut store: HashMap<String, Vec<u8>> = HashMap::from([("a".into(), b"a0".to_vec())]);
        ops.iter()
            .map(|op| match op {
                Request::Put { key, val } => {
                    if server != Server::DropsPuts {
                        store.insert(key.clone(), val.clone());
                    }
                    reply(Outcome::Ok, &[])
                }
                Request::Get { key } => match store.get(key) {
                    Some(v) => {
                        let mut v = v.clone();
                        if server == Server::Corrupts {
                            v[0] ^= 1;
                        }
                        Reply::new(Outcome::Ok, vec![v])
                    }
                    None => reply(Outcome::NotFound, &[]),
                },
                o => unreachable!("{o:?}"),
            })
            .collect()
    }

    /// The in-order checker over a run: how many replies it rejected.
    fn wrong_replies(server: Server) -> usize {
        let ops = vec![
            get("a"),
            put("a", b"a1"),
            get("a"),
            put("a", b"a2"),
            get("a"),
            get("zz"),
        ];
        let e = expected(&ops);
        let mut now = Current::default();
        let mut wrong = 0;
        for (op, r) in ops.iter().zip(serve(server, &ops)) {
            if !e.check_now(&mut now, op, &r) {
                wrong += 1;
            }
            e.apply_to(&mut now, op);
        }
        wrong
    }

    #[test]
    fn a_lying_server_is_caught_and_an_honest_one_is_not() {
        assert_eq!(wrong_replies(Server::Honest), 0);
        assert_eq!(wrong_replies(Server::DropsPuts), 2, "two stale reads");
        assert_eq!(wrong_replies(Server::Corrupts), 3, "three corrupt values");
    }
}
