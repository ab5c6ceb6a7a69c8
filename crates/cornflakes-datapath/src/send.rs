//! Serialize into your own buffer and get the scatter-gather entries for the rest: the
//! serialize-and-send of a datapath, for datapaths and framings outside this project.

use crate::datapath::plan_demote;
use crate::mem::RcBuf;
use crate::obj::{CornflakesObj, Sizes};
use crate::wire::{BufferTooSmall, Demote};

/// How one object goes out as a first buffer (HEADER AREA + COPY AREA, written by
/// [`write_head`](Self::write_head)) followed by one descriptor per zero-copy entry
/// ([`for_each_zero_copy`](Self::for_each_zero_copy)), with at most `max_zero_copy` such
/// entries: when the object has more, the smallest are demoted to copies (see
/// [`Demote::plan`]). The message on the wire is the head followed by the entries, in order,
/// [`total_len`](Self::total_len) bytes.
///
/// ```
/// use cornflakes::{handwritten::GetM, Arena, CFBytes, PinnedMemory, RcBuf, SendPlan};
/// let mem = PinnedMemory::with_defaults().unwrap();
/// let arena = Arena::with_memory(&mem);
/// let value = mem.alloc_copy(&[7u8; 4096]).unwrap();
/// let mut m = GetM::new_in(&arena);
/// m.set_id(1);
/// m.get_mut_vals().append(CFBytes::new(&value[..], &arena));
///
/// // My NIC takes 4 descriptors per frame; my framing header is 16 bytes.
/// let plan = SendPlan::new(&m, 4 - 1);
/// let mut tx = vec![0u8; 16 + plan.head_len()]; // or a pinned transmit buffer
/// let head = plan.write_head(&mut tx[16..]).unwrap();
/// // Post `tx[..16 + head]`, then each zero-copy entry, keeping a clone until completion.
/// let mut entries: Vec<RcBuf> = Vec::new();
/// plan.for_each_zero_copy(|b| entries.push(b.clone()));
/// let sent: usize = head + entries.iter().map(|b| b.len()).sum::<usize>();
/// assert_eq!((sent, entries.len()), (plan.total_len(), plan.zero_copy_entries()));
/// assert_eq!(value.ref_count(), 3); // ours, the object's, the posted entry's
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SendPlan<'o, O: ?Sized> {
    obj: &'o O,
    sizes: Sizes,
    demote: Demote,
    demoted: usize,
    entries: usize,
}

impl<'o, O: CornflakesObj + ?Sized> SendPlan<'o, O> {
    /// Plans sending `obj` with at most `max_zero_copy` zero-copy entries after the head
    /// (a device's scatter-gather limit minus the entries the caller uses itself).
    #[inline]
    pub fn new(obj: &'o O, max_zero_copy: usize) -> Self {
        Self::with_sizes(obj, obj.sizes(), max_zero_copy)
    }

    /// [`new`](Self::new) when the caller already has `sizes` = `obj.sizes()`.
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
            .write_header_and_copy(&self.sizes, buf, self.demote, self.demoted)
    }

    /// Calls `f` on each zero-copy entry, in wire order: post each as its own descriptor,
    /// keeping a clone (`RcBuf::clone`) until the device is done with it.
    #[inline]
    pub fn for_each_zero_copy(&self, mut f: impl FnMut(&RcBuf)) {
        let mut walk = self.demote;
        self.obj.for_each_zero_copy(&mut walk, &mut f);
    }
}
