//! Hand-written objects for the two worked examples of the wire-format spec (test fixtures:
//! built with the feature `fixtures`, or in this crate's own tests).
//!
//! They are what `cornflakes-codegen` generates for these schemas, written out by hand: tests
//! and benchmarks across the workspace use them as fixtures, and they show the shape of generated
//! code (presence bitmap, sizes kept per list, `emit` / `for_each_zero_copy` / `decode_from`).
//!
//! ```proto
//! message GetM { uint32 id = 1; repeated string keys = 2; repeated bytes vals = 3; }
//! message Inner { bytes b = 1; bool f = 33; }
//! message Outer { uint64 a = 1; Inner in = 2; repeated Inner list = 4; repeated int32 nums = 5; }
//! ```

use bumpalo::boxed::Box as ABox;

use crate::arena::Arena;
use crate::cfptr::{CFBytes, CFString};
use crate::list::{Leaf, LeafList, MessageList, PackedList};
use crate::mem::PinnedRef;
use crate::obj::{CornflakesObj, DecodeObj, Sizes};
use crate::wire::{DecodeError, Demote, Encoder, HeaderReader, Presence, PAIR};

// What the datapaths send through, as generated code declares it.
impl crate::datapath::SendObject for GetM<'_> {
    crate::send_object_methods!();
}

impl crate::datapath::SendObject for Inner<'_> {
    crate::send_object_methods!();
}

impl crate::datapath::SendObject for Outer<'_> {
    crate::send_object_methods!();
}

/// `message GetM { uint32 id = 1; repeated string keys = 2; repeated bytes vals = 3; }`
pub struct GetM<'a> {
    arena: &'a Arena,
    p: Presence<1>,
    id: u32,
    keys: LeafList<'a, CFString<'a>>,
    vals: LeafList<'a, CFBytes<'a>>,
}

impl<'a> GetM<'a> {
    const KNOWN: [u32; 1] = [0b111];

    /// An empty object built in `arena`.
    pub fn new_in(arena: &'a Arena) -> Self {
        GetM {
            arena,
            p: Presence::default(),
            id: 0,
            keys: LeafList::with_capacity_in(0, arena),
            vals: LeafList::with_capacity_in(0, arena),
        }
    }

    /// Whether `id` is set.
    pub fn has_id(&self) -> bool {
        self.p.words[0] & 1 != 0
    }
    /// `id`, or 0 when absent.
    pub fn get_id(&self) -> u32 {
        self.id
    }
    /// Sets `id`.
    pub fn set_id(&mut self, v: u32) {
        self.id = v;
        self.p.set(1, 4);
    }
    /// Clears `id`.
    pub fn clear_id(&mut self) {
        self.id = 0;
        self.p.clear(1, 4);
    }

    /// Whether `keys` is present (initialised).
    pub fn has_keys(&self) -> bool {
        self.p.words[0] & 2 != 0
    }
    /// Makes `keys` present and empty, with room for `cap` elements.
    pub fn init_keys(&mut self, cap: usize) {
        self.keys.reset_with_capacity(cap);
        self.p.set(2, 8);
    }
    /// `keys` (empty when absent).
    pub fn get_keys(&self) -> &LeafList<'a, CFString<'a>> {
        &self.keys
    }
    /// `keys`, mutably; makes the field present (empty) when absent, so appended values are
    /// always sent.
    pub fn get_mut_keys(&mut self) -> &mut LeafList<'a, CFString<'a>> {
        self.p.set(2, 8);
        &mut self.keys
    }
    /// Clears `keys`.
    pub fn clear_keys(&mut self) {
        self.keys = LeafList::with_capacity_in(0, self.arena);
        self.p.clear(2, 8);
    }

    /// Whether `vals` is present (initialised).
    pub fn has_vals(&self) -> bool {
        self.p.words[0] & 4 != 0
    }
    /// Makes `vals` present and empty, with room for `cap` elements.
    pub fn init_vals(&mut self, cap: usize) {
        self.vals.reset_with_capacity(cap);
        self.p.set(3, 8);
    }
    /// `vals` (empty when absent).
    pub fn get_vals(&self) -> &LeafList<'a, CFBytes<'a>> {
        &self.vals
    }
    /// `vals`, mutably; makes the field present (empty) when absent, so appended values are
    /// always sent.
    pub fn get_mut_vals(&mut self) -> &mut LeafList<'a, CFBytes<'a>> {
        self.p.set(3, 8);
        &mut self.vals
    }
    /// Clears `vals`.
    pub fn clear_vals(&mut self) {
        self.vals = LeafList::with_capacity_in(0, self.arena);
        self.p.clear(3, 8);
    }

    #[inline]
    fn own_header_len(&self) -> usize {
        self.p.header_len()
    }

    /// Decodes from plain bytes; values borrow `buf`.
    pub fn deserialize(buf: &'a [u8], arena: &'a Arena) -> Result<Self, DecodeError> {
        Self::deserialize_bytes(buf, arena)
    }
}

impl CornflakesObj for GetM<'_> {
    #[inline]
    fn sizes(&self) -> Sizes {
        let mut s = Sizes {
            header: self.own_header_len(),
            ..Sizes::default()
        };
        if self.p.words[0] & 2 != 0 {
            s += self.keys.sizes();
        }
        if self.p.words[0] & 4 != 0 {
            s += self.vals.sizes();
        }
        s
    }

    #[inline]
    fn emit(&self, enc: &mut Encoder<'_>, pos: usize) -> usize {
        let mut slot = enc.presence(pos, &self.p);
        let mut sub = pos + self.own_header_len();
        let b = self.p.words[0];
        if b & 1 != 0 {
            enc.put(slot, self.id);
            slot += 4;
        }
        if b & 2 != 0 {
            enc.put_pair(slot, self.keys.len(), sub);
            slot += PAIR;
            sub = self.keys.emit(enc, sub);
        }
        if b & 4 != 0 {
            enc.put_pair(slot, self.vals.len(), sub);
            sub = self.vals.emit(enc, sub);
        }
        sub
    }

    #[inline]
    fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F) {
        if self.p.words[0] & 2 != 0 {
            self.keys.for_each_zero_copy(demote, f);
        }
        if self.p.words[0] & 4 != 0 {
            self.vals.for_each_zero_copy(demote, f);
        }
    }
}

impl<'a> DecodeObj<'a> for GetM<'a> {
    fn decode_from(mut h: HeaderReader<'_, 'a>, arena: &'a Arena) -> Result<Self, DecodeError> {
        h.check_fields(&Self::KNOWN, 3)
            .map_err(|e| e.within("GetM"))?;
        let mut m = GetM::new_in(arena);
        if h.has(1) {
            m.set_id(h.scalar().map_err(|e| e.within("GetM.id"))?);
        }
        if h.has(2) {
            let mut it = h.leaf_list().map_err(|e| e.within("GetM.keys"))?;
            m.init_keys(it.len());
            while let Some(v) = it.next_leaf() {
                m.keys
                    .append(CFString::from_ptr(v.map_err(|e| e.within("GetM.keys"))?));
            }
        }
        if h.has(3) {
            let mut it = h.leaf_list().map_err(|e| e.within("GetM.vals"))?;
            m.init_vals(it.len());
            while let Some(v) = it.next_leaf() {
                m.vals
                    .append(CFBytes::from_ptr(v.map_err(|e| e.within("GetM.vals"))?));
            }
        }
        Ok(m)
    }
}

/// `message Inner { bytes b = 1; bool f = 33; }`
pub struct Inner<'a> {
    p: Presence<2>,
    b: CFBytes<'a>,
    f: bool,
}

impl<'a> Inner<'a> {
    const KNOWN: [u32; 2] = [1, 1];

    /// An empty object.
    pub fn new_in(_arena: &'a Arena) -> Self {
        Inner {
            p: Presence::default(),
            b: CFBytes::default(),
            f: false,
        }
    }
    /// Whether `b` is set.
    pub fn has_b(&self) -> bool {
        self.p.words[0] & 1 != 0
    }
    /// `b` (empty when absent).
    pub fn get_b(&self) -> &CFBytes<'a> {
        &self.b
    }
    /// Sets `b`.
    pub fn set_b(&mut self, v: CFBytes<'a>) {
        self.b = v;
        self.p.set(1, 8);
    }
    /// Clears `b`.
    pub fn clear_b(&mut self) {
        self.b = CFBytes::default();
        self.p.clear(1, 8);
    }
    /// Whether `f` is set.
    pub fn has_f(&self) -> bool {
        self.p.words[1] & 1 != 0
    }
    /// `f` (false when absent).
    pub fn get_f(&self) -> bool {
        self.f
    }
    /// Sets `f`.
    pub fn set_f(&mut self, v: bool) {
        self.f = v;
        self.p.set(33, 1);
    }
    /// Clears `f`.
    pub fn clear_f(&mut self) {
        self.f = false;
        self.p.clear(33, 1);
    }

    #[inline]
    fn own_header_len(&self) -> usize {
        self.p.header_len()
    }
}

impl CornflakesObj for Inner<'_> {
    fn sizes(&self) -> Sizes {
        let mut s = Sizes {
            header: self.own_header_len(),
            ..Sizes::default()
        };
        if self.has_b() {
            s.add_leaf(self.b.ptr());
        }
        s
    }

    fn emit(&self, enc: &mut Encoder<'_>, pos: usize) -> usize {
        let mut slot = enc.presence(pos, &self.p);
        let sub = pos + self.own_header_len();
        if self.has_b() {
            enc.leaf(slot, self.b.ptr());
            slot += PAIR;
        }
        if self.has_f() {
            enc.put(slot, self.f);
        }
        sub
    }

    fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F) {
        if self.has_b() {
            if let Some(b) = self.b.ptr().as_pinned() {
                if demote.keep_zero_copy(b.len()) {
                    f(b);
                }
            }
        }
    }
}

impl<'a> DecodeObj<'a> for Inner<'a> {
    fn decode_from(mut h: HeaderReader<'_, 'a>, arena: &'a Arena) -> Result<Self, DecodeError> {
        h.check_fields(&Self::KNOWN, 33)
            .map_err(|e| e.within("Inner"))?;
        let mut m = Inner::new_in(arena);
        if h.has(1) {
            m.set_b(CFBytes(h.leaf().map_err(|e| e.within("Inner.b"))?));
        }
        if h.has(33) {
            m.set_f(h.scalar().map_err(|e| e.within("Inner.f"))?);
        }
        Ok(m)
    }
}

/// `message Outer { uint64 a = 1; Inner in = 2; repeated Inner list = 4; repeated int32 nums = 5; }`
pub struct Outer<'a> {
    arena: &'a Arena,
    p: Presence<1>,
    a: u64,
    in_: Option<ABox<'a, Inner<'a>>>,
    list: MessageList<'a, Inner<'a>>,
    nums: PackedList<'a, i32>,
}

impl<'a> Outer<'a> {
    const KNOWN: [u32; 1] = [0b11011];

    /// An empty object built in `arena`.
    pub fn new_in(arena: &'a Arena) -> Self {
        Outer {
            arena,
            p: Presence::default(),
            a: 0,
            in_: None,
            list: MessageList::with_capacity_in(0, arena),
            nums: PackedList::with_capacity_in(0, arena),
        }
    }
    /// `a`, or 0 when absent.
    pub fn get_a(&self) -> u64 {
        self.a
    }
    /// Sets `a`.
    pub fn set_a(&mut self, v: u64) {
        self.a = v;
        self.p.set(1, 8);
    }
    /// Whether `in` is set.
    pub fn has_in(&self) -> bool {
        self.p.words[0] & 2 != 0
    }
    /// `in`, if set.
    pub fn get_in(&self) -> Option<&Inner<'a>> {
        self.in_.as_deref()
    }
    /// `in`, set to an empty `Inner` first when absent.
    pub fn get_mut_in(&mut self) -> &mut Inner<'a> {
        self.p.set(2, 8);
        let arena = self.arena;
        self.in_
            .get_or_insert_with(|| ABox::new_in(Inner::new_in(arena), arena.bump()))
    }
    /// Sets `in`.
    pub fn set_in(&mut self, v: Inner<'a>) {
        self.in_ = Some(ABox::new_in(v, self.arena.bump()));
        self.p.set(2, 8);
    }
    /// Makes `list` present and empty, with room for `cap` elements.
    pub fn init_list(&mut self, cap: usize) {
        self.list = MessageList::with_capacity_in(cap, self.arena);
        self.p.set(4, 8);
    }
    /// `list`.
    pub fn get_list(&self) -> &MessageList<'a, Inner<'a>> {
        &self.list
    }
    /// `list`, mutably; makes the field present (empty) when absent.
    pub fn get_mut_list(&mut self) -> &mut MessageList<'a, Inner<'a>> {
        self.p.set(4, 8);
        &mut self.list
    }
    /// Makes `nums` present and empty, with room for `cap` elements.
    pub fn init_nums(&mut self, cap: usize) {
        self.nums = PackedList::with_capacity_in(cap, self.arena);
        self.p.set(5, 8);
    }
    /// `nums`.
    pub fn get_nums(&self) -> &PackedList<'a, i32> {
        &self.nums
    }
    /// `nums`, mutably; makes the field present (empty) when absent.
    pub fn get_mut_nums(&mut self) -> &mut PackedList<'a, i32> {
        self.p.set(5, 8);
        &mut self.nums
    }

    #[inline]
    fn own_header_len(&self) -> usize {
        self.p.header_len()
    }
}

impl CornflakesObj for Outer<'_> {
    fn sizes(&self) -> Sizes {
        let mut s = Sizes {
            header: self.own_header_len(),
            ..Sizes::default()
        };
        let b = self.p.words[0];
        if b & 2 != 0 {
            if let Some(m) = &self.in_ {
                s += m.sizes();
            }
        }
        if b & 8 != 0 {
            s += self.list.sizes();
        }
        if b & 16 != 0 {
            s += self.nums.sizes();
        }
        s
    }

    fn emit(&self, enc: &mut Encoder<'_>, pos: usize) -> usize {
        let mut slot = enc.presence(pos, &self.p);
        let mut sub = pos + self.own_header_len();
        let b = self.p.words[0];
        if b & 1 != 0 {
            enc.put(slot, self.a);
            slot += 8;
        }
        if b & 2 != 0 {
            if let Some(m) = &self.in_ {
                enc.put_pair(slot, 0, sub);
                sub = m.emit(enc, sub);
            }
            slot += PAIR;
        }
        if b & 8 != 0 {
            enc.put_pair(slot, self.list.len(), sub);
            sub = self.list.emit(enc, sub);
            slot += PAIR;
        }
        if b & 16 != 0 {
            enc.packed(slot, &self.nums);
        }
        sub
    }

    fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F) {
        let b = self.p.words[0];
        if b & 2 != 0 {
            if let Some(m) = &self.in_ {
                m.for_each_zero_copy(demote, f);
            }
        }
        if b & 8 != 0 {
            self.list.for_each_zero_copy(demote, f);
        }
    }
}

impl<'a> DecodeObj<'a> for Outer<'a> {
    fn decode_from(mut h: HeaderReader<'_, 'a>, arena: &'a Arena) -> Result<Self, DecodeError> {
        h.check_fields(&Self::KNOWN, 5)
            .map_err(|e| e.within("Outer"))?;
        let mut m = Outer::new_in(arena);
        if h.has(1) {
            m.set_a(h.scalar().map_err(|e| e.within("Outer.a"))?);
        }
        if h.has(2) {
            let sub = h.nested().map_err(|e| e.within("Outer.in"))?;
            m.set_in(Inner::decode_from(sub, arena).map_err(|e| e.within("Outer.in"))?);
        }
        if h.has(4) {
            let mut it = h.message_list().map_err(|e| e.within("Outer.list"))?;
            m.init_list(it.len());
            while let Some(sub) = it.next_header() {
                let sub = sub.map_err(|e| e.within("Outer.list"))?;
                m.list
                    .append(Inner::decode_from(sub, arena).map_err(|e| e.within("Outer.list"))?);
            }
        }
        if h.has(5) {
            let (bytes, n) = h.packed::<i32>().map_err(|e| e.within("Outer.nums"))?;
            m.nums = PackedList::from_le_bytes(bytes, n, arena);
            m.p.set(5, 8);
        }
        Ok(m)
    }
}

impl std::fmt::Debug for GetM<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("GetM");
        if self.has_id() {
            d.field("id", &self.id);
        }
        if self.has_keys() {
            d.field("keys", &self.keys);
        }
        if self.has_vals() {
            d.field("vals", &self.vals);
        }
        d.finish()
    }
}

impl std::fmt::Debug for Inner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Inner");
        if self.has_b() {
            d.field("b", &self.b);
        }
        if self.has_f() {
            d.field("f", &self.f);
        }
        d.finish()
    }
}

impl std::fmt::Debug for Outer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Outer");
        let b = self.p.words[0];
        if b & 1 != 0 {
            d.field("a", &self.a);
        }
        if b & 2 != 0 {
            d.field("in", &self.in_.as_deref());
        }
        if b & 8 != 0 {
            d.field("list", &self.list);
        }
        if b & 16 != 0 {
            d.field("nums", &self.nums);
        }
        d.finish()
    }
}
