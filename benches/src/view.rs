//! `cf-view`: Cornflakes hybrid on the wire, received through the generated views
//! (`M::view_rcbuf`, docs/runtime.md "Views"): the message is read in place and nothing is
//! built. Serializing is cf-hybrid's (the same bytes; the `count` table shows its serialize
//! cells as cf-hybrid's: this `Lib::serialize` calls cf-hybrid's, and callgrind's
//! `--toggle-collect` would switch off inside the nested match).

use std::hint::black_box;

use cornflakes::wire::MessageView;
use cornflakes::{DecodeError, PinnedMemory, RcBuf};

use super::schema::{List, Tree1View, Tree2View, Tree3View, Tree4View, Tree5View};
use super::{Build, Cf, CfMode, Lib, Shape, Store};

/// Cornflakes hybrid, deserialized through views.
pub struct CfView(Cf);

impl CfView {
    pub(crate) fn new(mem: &PinnedMemory, build: Build) -> CfView {
        CfView(Cf::new(mem, CfMode::Hybrid, build))
    }
}

/// A generated tree view read into its leaves' lengths, as a reader returning the view's
/// errors writes it.
trait TreeView: Copy {
    fn read(self) -> Result<usize, DecodeError>;
}

impl TreeView for Tree1View<'_> {
    #[inline(always)]
    fn read(self) -> Result<usize, DecodeError> {
        Ok(black_box(self.get_left()?).len() + black_box(self.get_right()?).len())
    }
}

macro_rules! tree_view {
    ($($t:ident),*) => {$(
        impl TreeView for super::schema::$t<'_> {
            #[inline(always)]
            fn read(self) -> Result<usize, DecodeError> {
                let l = match self.get_left()? {
                    Some(l) => l.read()?,
                    None => 0,
                };
                let r = match self.get_right()? {
                    Some(r) => r.read()?,
                    None => 0,
                };
                Ok(l + r)
            }
        }
    )*};
}

tree_view!(Tree2View, Tree3View, Tree4View, Tree5View);

/// Opens the top-level `V` of `rx` and reads it.
#[inline(always)]
fn read_tree<'a, V: TreeView + MessageView<'a>>(rx: &'a RcBuf) -> usize {
    V::open_at(rx.as_slice(), 0, 0)
        .and_then(V::read)
        .expect("valid message")
}

impl Lib for CfView {
    fn name(&self) -> &'static str {
        "cf-view"
    }

    #[inline(never)]
    fn serialize(&mut self, store: &Store, idx: &[u32], tx: &mut [u8]) -> usize {
        self.0.serialize(store, idx, tx)
    }

    #[inline(never)]
    fn deserialize(&mut self, shape: Shape, rx: &RcBuf) -> usize {
        match shape {
            Shape::Tree { depth: 1, .. } => read_tree::<Tree1View>(rx),
            Shape::Tree { depth: 2, .. } => read_tree::<Tree2View>(rx),
            Shape::Tree { depth: 3, .. } => read_tree::<Tree3View>(rx),
            Shape::Tree { depth: 4, .. } => read_tree::<Tree4View>(rx),
            Shape::Tree { .. } => read_tree::<Tree5View>(rx),
            _ => {
                let m = List::view_rcbuf(rx).expect("valid message");
                let mut n = m.get_id() as usize;
                for v in m.get_vals().expect("valid list").iter() {
                    n += black_box(v.expect("valid value")).len();
                }
                n
            }
        }
    }

    fn after(&mut self) {
        self.0.after();
    }

    fn encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize {
        self.0.encode(store, idx, out)
    }
}
