//! The store's operations, run once for every serialization: a format decodes a request into
//! something that implements [`Request`], [`execute`] applies it to the [`Store`], and the
//! format encodes the [`Answer`]. What an operation means lives here only:
//!
//! - **Well-formed or refused**: a single-key operation takes exactly one key (and one value
//!   for `put` / `append`, none otherwise), `getm` at least one key and no values, `putm` one
//!   value per key. Anything else, or any key that is not UTF-8, is refused `BAD_REQUEST`
//!   (counted, [`Store::tally`]) before the store is touched ([`crate::validate`]).
//! - **Writes exactly once** under retries: a write runs through [`Store::once`] as an
//!   [`Incoming`] request (its client, id and bytes; taken only for writes: reads pay nothing
//!   for it). A write that reuses a recorded id with other bytes is refused `BAD_REQUEST`.
//! - **All or nothing**: `putm` checks every key before the first write and the store applies
//!   it whole ([`Store::put_many`]).
//! - **Reads borrow**: the values answered are the store's own buffers, borrowed for as long
//!   as the reply is being built — no copy, no allocation ([`Items`] is reused for `getm`).
//!
//! How a stored value goes on the wire (by reference, copied, in pieces, or `TOO_LARGE` when
//! a format cannot carry a value stored in pieces) is the format's business.

use cornflakes_rpc::once::Incoming;

use crate::ops::{OpKind, Status};
use crate::store::{Outcome, Store};
use crate::validate;
use crate::value::Value;

/// A decoded request, whatever its wire format: the operation and its keys, values and list
/// index, borrowed from the received message.
pub trait Request {
    /// The operation.
    fn kind(&self) -> OpKind;
    /// How many keys the request carries.
    fn key_count(&self) -> usize;
    /// Key `i` (`i < key_count()`) as a string; `BAD_REQUEST` when it is not UTF-8.
    fn key(&self, i: usize) -> Result<&str, Status>;
    /// How many values the request carries.
    fn val_count(&self) -> usize;
    /// Value `i` (`i < val_count()`).
    fn val(&self, i: usize) -> &[u8];
    /// The list index of `get_from_list` (0 for the other operations).
    fn index(&self) -> usize;
}

/// One key's result in a `getm`: its value, or why there is none.
pub type Item<'s> = Result<&'s Value, Status>;

/// What [`execute`] answered, borrowing the store (`'s`) and the caller's `getm` list (`'i`).
#[derive(Debug)]
pub enum Answer<'s, 'i> {
    /// Refused before the store was touched (`BAD_REQUEST`, counted).
    Refused(Status),
    /// A write's outcome (`put`, `putm`, `append`, `delete`): for `append`, the list's new
    /// length; a retry is answered its first outcome, a reused id `BAD_REQUEST`.
    Wrote(Outcome),
    /// `get` (the first element of the key's list) or `get_from_list`.
    Value(Result<&'s Value, Status>),
    /// `getlist`: the key's whole list.
    List(Result<&'s [Value], Status>),
    /// `getm`: each key's result, in request order.
    Values(&'i [Item<'s>]),
}

impl Answer<'_, '_> {
    /// The reply's status: the failure, or for `getm` the first key's failure, else `OK`.
    pub fn status(&self) -> Status {
        let of = |e: Option<Status>| e.unwrap_or(Status::Ok);
        match self {
            Answer::Refused(s) => *s,
            Answer::Wrote(r) => of(r.err()),
            Answer::Value(r) => of(r.err()),
            Answer::List(r) => of(r.err()),
            Answer::Values(items) => of(items.iter().find_map(|r| r.err())),
        }
    }
}

/// Whether `req` has the keys and values its operation takes (`BAD_REQUEST` otherwise:
/// never served with the first key or value).
fn well_formed<R: Request + ?Sized>(kind: OpKind, req: &R) -> Result<(), Status> {
    let (keys, vals) = (req.key_count(), req.val_count());
    let ok = match kind {
        OpKind::Get | OpKind::GetList | OpKind::GetFromList | OpKind::Delete => {
            keys == 1 && vals == 0
        }
        OpKind::Put | OpKind::Append => keys == 1 && vals == 1,
        OpKind::GetM => keys >= 1 && vals == 0,
        OpKind::PutM => return validate::paired(keys, vals),
    };
    if ok {
        Ok(())
    } else {
        Err(Status::BadRequest)
    }
}

/// Applies `req` to `store`; `tag` gives the request as the exactly-once table sees it
/// (called only for a write, so a read pays nothing for its hash or its client's address:
/// e.g. `|| Incoming::new(msg, data, || dp.peer_addr(conn))`), `items` (emptied first)
/// receives a `getm`'s results. The answer borrows the store's values.
#[inline]
pub fn execute<'s, 'i, 'd, R: Request + ?Sized>(
    store: &'s mut Store,
    req: &R,
    tag: impl FnOnce() -> Option<Incoming<'d>>,
    items: &'i mut Vec<Item<'s>>,
) -> Answer<'s, 'i> {
    let kind = req.kind();
    if let Err(s) = well_formed(kind, req) {
        return Answer::Refused(store.tally(s));
    }
    // The one key of a single-key operation (`well_formed` checked there is one).
    macro_rules! key {
        () => {
            match req.key(0) {
                Ok(k) => k,
                Err(s) => return Answer::Refused(store.tally(s)),
            }
        };
    }
    match kind {
        OpKind::Get => {
            let k = key!();
            Answer::Value(store.get(k))
        }
        OpKind::GetFromList => {
            let k = key!();
            Answer::Value(store.get_from_list(k, req.index()))
        }
        OpKind::GetList => {
            let k = key!();
            Answer::List(store.get_list(k))
        }
        OpKind::Put => {
            let k = key!();
            let v = req.val(0);
            Answer::Wrote(store.once(tag(), |s| s.put(k, v).map(|_| 0)))
        }
        OpKind::Append => {
            let k = key!();
            let v = req.val(0);
            Answer::Wrote(store.once(tag(), |s| s.append(k, v)))
        }
        OpKind::Delete => {
            let k = key!();
            Answer::Wrote(store.once(tag(), |s| s.delete(k).map(|_| 0)))
        }
        OpKind::GetM => {
            // Every key checked before any is read: one bad key refuses the request.
            if let Err(s) = all_keys(req) {
                return Answer::Refused(store.tally(s));
            }
            let store: &'s Store = store;
            items.clear();
            items.extend((0..req.key_count()).map(|i| req.key(i).and_then(|k| store.get(k))));
            Answer::Values(items)
        }
        OpKind::PutM => {
            // Every key checked before the first write; the store applies all or nothing. It
            // copies the values into pinned buffers and builds its entries: a write
            // allocates in the store, whatever the serialization.
            let pairs: Result<Vec<(&str, &[u8])>, Status> = (0..req.key_count())
                .map(|i| Ok((req.key(i)?, req.val(i))))
                .collect();
            match pairs {
                Ok(pairs) => Answer::Wrote(store.once(tag(), |s| s.put_many(&pairs).map(|_| 0))),
                Err(s) => Answer::Refused(store.tally(s)),
            }
        }
    }
}

/// `BAD_REQUEST` unless every key of `req` is UTF-8 (nothing collected).
fn all_keys<R: Request + ?Sized>(req: &R) -> Result<(), Status> {
    (0..req.key_count()).try_for_each(|i| req.key(i).map(drop))
}

/// The `getm` result list a server keeps from one request to the next ([`Items::take`] /
/// [`Items::put_back`]), so a `getm` allocates nothing once warm.
#[derive(Debug, Default)]
pub struct Items(Vec<Item<'static>>);

impl Items {
    /// The list, empty, for one request's answer (whose borrow of the store it takes).
    pub fn take<'s>(&mut self) -> Vec<Item<'s>> {
        recycle(std::mem::take(&mut self.0))
    }

    /// Keeps the list's room for the next request (its contents are dropped).
    pub fn put_back(&mut self, v: Vec<Item<'_>>) {
        self.0 = recycle(v);
    }
}

/// An emptied list of items of another lifetime, keeping its allocation (the standard
/// library collects a `Vec`'s own iterator in place when the item layout is the same).
fn recycle<'b>(mut v: Vec<Item<'_>>) -> Vec<Item<'b>> {
    v.clear();
    // `filter_map` (not `filter`) because the item type changes lifetime.
    #[allow(clippy::unnecessary_filter_map)]
    v.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use cornflakes::mem::MemoryConfig;
    use cornflakes::{Msg, PinnedMemory};

    use super::*;
    use crate::store::StoreConfig;

    /// A request of any shape, as no wire format would let through.
    struct Raw {
        kind: OpKind,
        keys: Vec<&'static [u8]>,
        vals: Vec<&'static [u8]>,
        index: usize,
    }

    impl Request for Raw {
        fn kind(&self) -> OpKind {
            self.kind
        }
        fn key_count(&self) -> usize {
            self.keys.len()
        }
        fn key(&self, i: usize) -> Result<&str, Status> {
            validate::key(self.keys[i])
        }
        fn val_count(&self) -> usize {
            self.vals.len()
        }
        fn val(&self, i: usize) -> &[u8] {
            self.vals[i]
        }
        fn index(&self) -> usize {
            self.index
        }
    }

    fn raw(kind: OpKind, keys: &[&'static [u8]], vals: &[&'static [u8]]) -> Raw {
        Raw {
            kind,
            keys: keys.to_vec(),
            vals: vals.to_vec(),
            index: 0,
        }
    }

    fn store() -> (PinnedMemory, Store) {
        let mem = PinnedMemory::new(MemoryConfig {
            max_item_size: 16 * 1024,
            ..Default::default()
        })
        .unwrap();
        let store = Store::new(&mem, StoreConfig::default());
        (mem, store)
    }

    const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9);

    /// Runs `req` as request `id` from `CLIENT`; returns the answer's status and values.
    fn run(store: &mut Store, req: &Raw, id: u32) -> (Status, Vec<Option<Vec<u8>>>) {
        let msg = Msg::new(id, req.kind.msg_type());
        let body = format!("{id}");
        let tag = || Incoming::new(msg, body.as_bytes(), || Some(CLIENT));
        let mut items = Items::default();
        let mut list = items.take();
        let a = execute(store, req, tag, &mut list);
        let vals = match &a {
            Answer::Value(Ok(v)) => vec![Some(v.to_vec())],
            Answer::List(Ok(l)) => l.iter().map(|v| Some(v.to_vec())).collect(),
            Answer::Values(items) => items.iter().map(|r| r.ok().map(Value::to_vec)).collect(),
            Answer::Wrote(Ok(n)) => vec![Some(n.to_le_bytes().to_vec())],
            _ => vec![],
        };
        (a.status(), vals)
    }

    #[test]
    fn malformed_shapes_are_refused_and_counted_before_the_store_is_touched() {
        let (_m, mut s) = store();
        for req in [
            raw(OpKind::Get, &[b"a", b"b"], &[]),
            raw(OpKind::Get, &[], &[]),
            raw(OpKind::Put, &[b"a"], &[]),
            raw(OpKind::Put, &[b"a"], &[b"1", b"2"]),
            raw(OpKind::Delete, &[b"a"], &[b"1"]),
            raw(OpKind::GetM, &[], &[]),
            raw(OpKind::PutM, &[b"a", b"b"], &[b"1"]),
            raw(OpKind::PutM, &[], &[]),
            raw(OpKind::Put, &[b"\xff"], &[b"1"]),
            raw(OpKind::GetM, &[b"a", b"\xff"], &[]),
            raw(OpKind::PutM, &[b"a", b"\xff"], &[b"1", b"2"]),
        ] {
            assert_eq!(run(&mut s, &req, 1).0, Status::BadRequest, "{:?}", req.kind);
        }
        let stats = s.stats();
        assert_eq!((stats.bad_requests, stats.keys), (11, 0));
    }

    #[test]
    fn reads_borrow_what_writes_stored() {
        let (_m, mut s) = store();
        let putm = raw(OpKind::PutM, &[b"a", b"b"], &[b"1", b"22"]);
        assert_eq!(run(&mut s, &putm, 1).0, Status::Ok);
        let append = raw(OpKind::Append, &[b"b"], &[b"333"]);
        let (st, n) = run(&mut s, &append, 2);
        assert_eq!(
            (st, n),
            (Status::Ok, vec![Some(2usize.to_le_bytes().to_vec())])
        );
        let getm = raw(OpKind::GetM, &[b"a", b"zz", b"b"], &[]);
        assert_eq!(
            run(&mut s, &getm, 3),
            (
                Status::NotFound,
                vec![Some(b"1".to_vec()), None, Some(b"22".to_vec())]
            )
        );
        let list = raw(OpKind::GetList, &[b"b"], &[]);
        assert_eq!(
            run(&mut s, &list, 4).1,
            vec![Some(b"22".to_vec()), Some(b"333".to_vec())]
        );
        let mut at = raw(OpKind::GetFromList, &[b"b"], &[]);
        at.index = 1;
        assert_eq!(run(&mut s, &at, 5).1, vec![Some(b"333".to_vec())]);
        at.index = 2;
        assert_eq!(run(&mut s, &at, 6).0, Status::BadIndex);
        assert_eq!(
            run(&mut s, &raw(OpKind::Delete, &[b"a"], &[]), 7).0,
            Status::Ok
        );
        assert_eq!(
            run(&mut s, &raw(OpKind::Get, &[b"a"], &[]), 8).0,
            Status::NotFound
        );
    }

    #[test]
    fn a_retried_write_is_answered_its_first_outcome_and_not_run_again() {
        let (_m, mut s) = store();
        let append = raw(OpKind::Append, &[b"l"], &[b"x"]);
        let first = run(&mut s, &append, 9);
        // The same client, id and bytes: a retry.
        assert_eq!(run(&mut s, &append, 9), first);
        assert_eq!(s.get_list("l").unwrap().len(), 1);
        // Another id: a new write.
        run(&mut s, &append, 10);
        assert_eq!(s.get_list("l").unwrap().len(), 2);
        let del = raw(OpKind::Delete, &[b"l"], &[]);
        assert_eq!(run(&mut s, &del, 11).0, Status::Ok);
        assert_eq!(run(&mut s, &del, 11).0, Status::Ok, "a retried delete");
        assert_eq!(run(&mut s, &del, 12).0, Status::NotFound);
    }

    #[test]
    fn a_recycled_list_keeps_its_room() {
        let mut items = Items::default();
        let mut v = items.take();
        v.extend([Err(Status::NotFound), Err(Status::BadIndex)]);
        let (cap, ptr) = (v.capacity(), v.as_ptr() as usize);
        items.put_back(v);
        let v = items.take();
        assert!(v.is_empty());
        assert_eq!((v.capacity(), v.as_ptr() as usize), (cap, ptr));
    }
}
