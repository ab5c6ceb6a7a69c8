//! [`Keeper`]: pinned buffers held on behalf of borrowed views, released together.

use std::cell::RefCell;

use crate::rcbuf::{PinnedRef, RcBuf};

/// Holds pinned buffers until [`clear`](Self::clear) (or its drop), lending a [`PinnedRef`] of
/// each for as long as it is borrowed: how an arena keeps the buffers its objects were given,
/// so that the objects themselves own nothing.
///
/// ```
/// let mem = cornflakes_mem::PinnedMemory::with_defaults().unwrap();
/// let mut keeper = cornflakes_mem::Keeper::default();
/// let buf = mem.alloc_copy(&[5u8; 900]).unwrap();
/// let probe = buf.clone();
/// let view = keeper.keep(buf);
/// assert_eq!((view.len(), probe.ref_count()), (900, 2));
/// keeper.clear();
/// assert_eq!(probe.ref_count(), 1);
/// ```
#[derive(Default)]
pub struct Keeper {
    bufs: RefCell<Vec<RcBuf>>,
}

impl Keeper {
    /// Keeps `buf` and returns a view of all of it, valid while the keeper is borrowed.
    pub fn keep(&self, buf: RcBuf) -> PinnedRef<'_> {
        let view = buf.pinned();
        // SAFETY: the view copies the buffer's pointers (not its address), so moving the buffer
        // into the vector, or the vector growing, leaves it valid; the buffer's reference keeps
        // the item alive and unchanged until `clear` or drop, which need the keeper unborrowed,
        // so for as long as the view's borrow of `self`.
        let view = unsafe { view.extend_to() };
        self.bufs.borrow_mut().push(buf);
        view
    }

    /// Buffers held.
    pub fn len(&self) -> usize {
        self.bufs.borrow().len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.bufs.borrow().is_empty()
    }

    /// Releases every buffer held.
    pub fn clear(&mut self) {
        self.bufs.get_mut().clear();
    }
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper").field("bufs", &self.len()).finish()
    }
}
