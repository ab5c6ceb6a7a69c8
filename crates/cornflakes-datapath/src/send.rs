//! Serialize into your own buffer and get the scatter-gather entries for the rest: the
//! serialize-and-send of a datapath, for datapaths and framings outside this project.

use cornflakes_mem::PinnedRef;

use crate::object::{BufferTooSmall, Demote, SendObject, Sizes};
use crate::plan_demote;

/// How one object goes out as a first buffer (HEADER AREA + COPY AREA, written by
/// [`write_head`](Self::write_head)) followed by one descriptor per zero-copy entry
/// ([`for_each_zero_copy`](Self::for_each_zero_copy)), with at most `max_zero_copy` such
/// entries: when the object has more, the smallest are demoted to copies (see
/// [`Demote::plan`]). The message on the wire is the head followed by the entries, in order,
/// [`total_len`](Self::total_len) bytes.
///
/// The runtime's `cornflakes::send` module shows it with a generated-style object.
#[derive(Clone, Copy, Debug)]
pub struct SendPlan<'o, O: ?Sized> {
    obj: &'o O,
    sizes: Sizes,
    demote: Demote,
    demoted: usize,
    entries: usize,
}

impl<'o, O: SendObject + ?Sized> SendPlan<'o, O> {
    /// Plans sending `obj` with at most `max_zero_copy` zero-copy entries after the head
    /// (a device's scatter-gather limit minus the entries the caller uses itself).
    #[inline]
    pub fn new(obj: &'o O, max_zero_copy: usize) -> Self {
        Self::with_sizes(obj, obj.object_sizes(), max_zero_copy)
    }

    /// [`new`](Self::new) when the caller already has `sizes` = `obj.object_sizes()`.
    #[inline]
    pub fn with_sizes(obj: &'o O, sizes: Sizes, max_zero_copy: usize) -> Self {
        let (demote, demoted) = plan_demote(obj, &sizes, max_zero_copy);
        SendPlan {
            obj,
            sizes,
            demote,
            demoted,
            entries: sizes.zero_copy_count.min(max_zero_copy),
        }
    }

    /// The object's sizes.
    #[inline]
    pub fn sizes(&self) -> &Sizes {
        &self.sizes
    }

    /// Length of the whole message (head and zero-copy entries).
    #[inline]
    pub fn total_len(&self) -> usize {
        self.sizes.total()
    }

    /// Bytes [`write_head`](Self::write_head) writes: header and copy areas, demoted entries
    /// included.
    #[inline]
    pub fn head_len(&self) -> usize {
        self.sizes.head() + self.demoted
    }

    /// Zero-copy entries [`for_each_zero_copy`](Self::for_each_zero_copy) produces.
    #[inline]
    pub fn zero_copy_entries(&self) -> usize {
        self.entries
    }

    /// Bytes of zero-copy values the plan copies into the head because the object has more
    /// zero-copy entries than allowed.
    #[inline]
    pub fn demoted_bytes(&self) -> usize {
        self.demoted
    }

    /// Writes the head into the start of `buf` (at least [`head_len`](Self::head_len) bytes)
    /// and returns its length; a shorter `buf` is refused before anything is written.
    #[inline]
    pub fn write_head(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        self.obj
            .write_object_head(&self.sizes, buf, self.demote, self.demoted)
    }

    /// [`write_head`](Self::write_head) and [`for_each_zero_copy`](Self::for_each_zero_copy)
    /// in one walk: each zero-copy entry goes to `f` as its slot in the head is written (the
    /// head's length, [`head_len`](Self::head_len), is known before). `f` is not called when
    /// `buf` is refused.
    #[inline]
    pub fn write_head_and_entries(
        &self,
        buf: &mut [u8],
        mut f: impl FnMut(PinnedRef<'_>),
    ) -> Result<usize, BufferTooSmall> {
        self.obj
            .write_object_head_and_leaves(&self.sizes, buf, self.demote, self.demoted, &mut f)
    }

    /// Calls `f` on each zero-copy entry, in wire order: post each as its own descriptor,
    /// keeping a counted reference (`PinnedRef::to_rcbuf`) until the device is done with it.
    /// The object holds none of its own (its entries are borrowed views).
    #[inline]
    pub fn for_each_zero_copy(&self, mut f: impl FnMut(PinnedRef<'_>)) {
        let mut walk = self.demote;
        self.obj.for_each_object_leaf(&mut walk, &mut f);
    }
}
