//! The per-thread handle table: every object a C program holds is an entry here, named by a
//! 64-bit handle that carries the slot, a thread tag and the slot's generation.
//!
//! Layout of a handle: bits 0-23 slot + 1, bits 24-35 the creating thread's tag, bits 36-63
//! the slot's generation. 0 is never a handle. A released slot's generation is bumped, so an
//! old handle to it no longer matches; generations wrap after 2^28 reuses of one slot, the one
//! case a stale handle could name a new entry (documented in the header).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

use cornflakes::{Arena, PinnedMemory, RcBuf, RxMsg};
use cornflakes_codegen::dynamic::{DynMessage, Value};
use cornflakes_codegen::Schema;

use crate::error::{cf_status, Error, Result};

// Written out, not made by a macro: cbindgen does not expand macros.
/// A handle to pinned memory (a per-thread pool of DMA-safe buffers). `{0}` is no handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct cf_mem {
    /// The handle's value (opaque).
    pub id: u64,
}

/// A handle to one reference to bytes in pinned memory. `{0}` is no handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct cf_buf {
    /// The handle's value (opaque).
    pub id: u64,
}

/// A handle to a loaded set of `.proto` files. `{0}` is no handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct cf_schema {
    /// The handle's value (opaque).
    pub id: u64,
}

/// A handle to a per-request arena that messages are built in. `{0}` is no handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct cf_arena {
    /// The handle's value (opaque).
    pub id: u64,
}

/// A handle to a message (object) of a schema. `{0}` is no handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct cf_msg {
    /// The handle's value (opaque).
    pub id: u64,
}

/// A handle to a datapath: a kernel UDP socket, AF_XDP, ConnectX or a DPDK port, each speaking
/// the Cornflakes framing (`cf_dp_kind` says which). `{0}` is no handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct cf_dp {
    /// The handle's value (opaque).
    pub id: u64,
}

const SLOT_BITS: u32 = 24;
const TAG_BITS: u32 = 12;
const GEN_SHIFT: u32 = SLOT_BITS + TAG_BITS;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const GEN_MASK: u32 = (1 << (64 - GEN_SHIFT)) - 1;

static NEXT_TAG: AtomicU32 = AtomicU32::new(1);

/// A value moved to the heap and owned through a raw pointer, so references to it may be
/// handed out as `'static` while the owner moves around in the table (a `Box` would assert
/// uniqueness on every move).
pub(crate) struct Owned<T>(NonNull<T>);

impl<T> Owned<T> {
    pub fn new(v: T) -> Owned<T> {
        Owned(NonNull::from(Box::leak(Box::new(v))))
    }
    /// A reference that the table's rules keep valid: whoever stores it is dropped before
    /// this owner (see `ArenaEntry` and `RootMsg`).
    pub fn get(&self) -> &'static T {
        // SAFETY: the pointer came from `Box::leak` and is freed only in `drop`; holders of the
        // returned reference are dropped before the owner (messages before their arena and
        // packets, by the table's invalidation and the field order of `RootMsg`).
        unsafe { self.0.as_ref() }
    }
    /// Mutable access, only while no reference from `get` is alive (the arena's messages are
    /// all invalidated first).
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: as in `get`; the caller removed every holder of a shared reference first.
        unsafe { self.0.as_mut() }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` and is dropped once, here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// An arena and the messages built in it (to invalidate before a reset).
pub(crate) struct ArenaEntry {
    pub arena: Owned<Arena>,
    pub msgs: Vec<u64>,
}

/// A message the C program owns. Fields drop in order: the object first, then what it borrows.
pub(crate) struct RootMsg {
    pub obj: DynMessage<'static>,
    /// Received packets the object's fields borrow.
    pub packets: Vec<Owned<RcBuf>>,
    pub schema: Rc<Schema>,
    pub arena: &'static Arena,
    /// The handle of that arena (views register with it).
    pub arena_handle: u64,
}

/// One step from a message to a field holding messages: field index, element (None for a
/// singular field).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub field: usize,
    pub elem: Option<usize>,
}

pub(crate) enum MsgEntry {
    Root(Box<RootMsg>),
    /// A read-only view of a message inside another, found again by its path at each use.
    View {
        root: u64,
        path: Vec<Step>,
    },
}

pub(crate) struct DpEntry {
    /// Any datapath (`any_dp.rs`).
    pub dp: Box<dyn crate::any_dp::AnyDatapath>,
    /// Messages received but not yet handed out (a burst larger than the caller's array).
    pub pending: VecDeque<RxMsg>,
    pub scratch: Vec<RxMsg>,
}

pub(crate) enum Entry {
    Mem(PinnedMemory),
    Buf(RcBuf),
    Schema(Rc<Schema>),
    Arena(ArenaEntry),
    Msg(MsgEntry),
    Dp(Box<DpEntry>),
}

impl Entry {
    fn kind(&self) -> &'static str {
        match self {
            Entry::Mem(_) => "cf_mem",
            Entry::Buf(_) => "cf_buf",
            Entry::Schema(_) => "cf_schema",
            Entry::Arena(_) => "cf_arena",
            Entry::Msg(_) => "cf_msg",
            Entry::Dp(_) => "cf_dp",
        }
    }
}

struct Slot {
    gen: u32,
    entry: Option<Entry>,
}

pub(crate) struct Table {
    tag: u64,
    slots: Vec<Slot>,
    free: Vec<u32>,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table {
        tag: u64::from(NEXT_TAG.fetch_add(1, Ordering::Relaxed)) & TAG_MASK,
        slots: Vec::new(),
        free: Vec::new(),
    });
}

/// Runs `f` with this thread's table. Nothing inside calls back into C, so the table is never
/// borrowed twice; entries removed by `f` are dropped after the borrow ends.
pub(crate) fn with<R>(f: impl FnOnce(&mut Table) -> Result<R>) -> Result<R> {
    TABLE.with(|t| {
        let mut t = t
            .try_borrow_mut()
            .map_err(|_| Error::new(cf_status::CF_ERR_INTERNAL, "handle table re-entered"))?;
        f(&mut t)
    })
}

impl Table {
    pub fn insert(&mut self, e: Entry) -> Result<u64> {
        let idx = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                if self.slots.len() as u64 >= SLOT_MASK {
                    return Err(Error::new(
                        cf_status::CF_ERR_ALLOC,
                        "too many live handles on this thread (16777215)",
                    ));
                }
                self.slots.push(Slot {
                    gen: 1,
                    entry: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[idx];
        slot.entry = Some(e);
        Ok((u64::from(slot.gen) << GEN_SHIFT) | (self.tag << SLOT_BITS) | (idx as u64 + 1))
    }

    fn index(&self, h: u64, want: &str) -> Result<usize> {
        if h == 0 {
            return Err(Error::new(
                cf_status::CF_ERR_BAD_HANDLE,
                format!("{want} is the zero handle (never created, or already released)"),
            ));
        }
        if (h >> SLOT_BITS) & TAG_MASK != self.tag {
            return Err(Error::new(
                cf_status::CF_ERR_BAD_HANDLE,
                format!("{want} {h:#x} was not made on this thread (handles belong to the thread that created them)"),
            ));
        }
        let idx = ((h & SLOT_MASK) - 1) as usize;
        let gen = (h >> GEN_SHIFT) as u32;
        match self.slots.get(idx) {
            Some(s) if s.gen == gen && s.entry.is_some() => Ok(idx),
            _ => Err(Error::new(
                cf_status::CF_ERR_BAD_HANDLE,
                format!("{want} {h:#x} is stale (released, or its arena was reset or freed)"),
            )),
        }
    }

    pub fn get(&self, h: u64, want: &str) -> Result<&Entry> {
        let idx = self.index(h, want)?;
        let e = self.slots[idx].entry.as_ref().expect("checked by index");
        check_kind(e, want)?;
        Ok(e)
    }

    pub fn get_mut(&mut self, h: u64, want: &str) -> Result<&mut Entry> {
        let idx = self.index(h, want)?;
        let e = self.slots[idx].entry.as_mut().expect("checked by index");
        check_kind(e, want)?;
        Ok(e)
    }

    /// Two different entries, the first mutable (a datapath and the message it sends).
    pub fn get_mut_and(
        &mut self,
        a: u64,
        wa: &str,
        b: u64,
        wb: &str,
    ) -> Result<(&mut Entry, &Entry)> {
        let (ia, ib) = (self.index(a, wa)?, self.index(b, wb)?);
        if ia == ib {
            return Err(Error::new(
                cf_status::CF_ERR_BAD_HANDLE,
                format!("{wa} and {wb} are the same handle"),
            ));
        }
        let (ea, eb) = if ia < ib {
            let (l, r) = self.slots.split_at_mut(ib);
            (&mut l[ia], &r[0])
        } else {
            let (l, r) = self.slots.split_at_mut(ia);
            (&mut r[0], &l[ib])
        };
        let ea = ea.entry.as_mut().expect("checked by index");
        let eb = eb.entry.as_ref().expect("checked by index");
        check_kind(ea, wa)?;
        check_kind(eb, wb)?;
        Ok((ea, eb))
    }

    /// Removes an entry of kind `want` and returns it (the caller drops it after the borrow).
    pub fn remove(&mut self, h: u64, want: &str) -> Result<Entry> {
        self.get(h, want)?;
        Ok(self.remove_at(h))
    }

    /// Removes whatever `h` names (already checked, or known to be live).
    fn remove_at(&mut self, h: u64) -> Entry {
        let idx = ((h & SLOT_MASK) - 1) as usize;
        let slot = &mut self.slots[idx];
        slot.gen = (slot.gen + 1) & GEN_MASK;
        if slot.gen == 0 {
            slot.gen = 1;
        }
        self.free.push(idx as u32);
        slot.entry.take().expect("live entry")
    }

    /// Removes `h` if it still names a live entry (a message of an arena being reset).
    pub fn remove_if_live(&mut self, h: u64) -> Option<Entry> {
        self.index(h, "handle").ok().map(|_| self.remove_at(h))
    }

    /// The message `h` names, following a view's path from its root.
    pub fn msg(&self, h: u64) -> Result<(&DynMessage<'static>, &RootMsg)> {
        match self.get(h, "cf_msg")? {
            Entry::Msg(MsgEntry::Root(r)) => Ok((&r.obj, r)),
            Entry::Msg(MsgEntry::View { root, path }) => {
                let r = match self.get(*root, "cf_msg")? {
                    Entry::Msg(MsgEntry::Root(r)) => r,
                    _ => unreachable!("a view's root is a root message"),
                };
                let mut m = &r.obj;
                for s in path {
                    m = step(m, *s).ok_or_else(|| {
                        Error::new(
                            cf_status::CF_ERR_BAD_HANDLE,
                            "the message this view was taken from no longer has that field",
                        )
                    })?;
                }
                Ok((m, r))
            }
            _ => unreachable!("checked kind"),
        }
    }

    /// The root message `h` names, mutably (views are read-only).
    pub fn root_mut(&mut self, h: u64) -> Result<&mut RootMsg> {
        match self.get_mut(h, "cf_msg")? {
            Entry::Msg(MsgEntry::Root(r)) => Ok(r),
            Entry::Msg(MsgEntry::View { .. }) => Err(Error::invalid(
                "this cf_msg was taken from another message and is read-only: build the inner \
                 message on its own and set it into the outer one",
            )),
            _ => unreachable!("checked kind"),
        }
    }
}

/// The message one step below `m`.
pub(crate) fn step<'m>(m: &'m DynMessage<'static>, s: Step) -> Option<&'m DynMessage<'static>> {
    match (m.get(s.field)?, s.elem) {
        (Value::Message(b), None) => Some(b),
        (Value::Messages(l), Some(i)) => l.get(i),
        _ => None,
    }
}

fn check_kind(e: &Entry, want: &str) -> Result<()> {
    if e.kind() == want {
        Ok(())
    } else {
        Err(Error::new(
            cf_status::CF_ERR_BAD_HANDLE,
            format!("expected a {want}, got a handle to a {}", e.kind()),
        ))
    }
}
