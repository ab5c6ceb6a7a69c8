//! Property tests: arbitrary objects round-trip through serialize / deserialize in every
//! threshold mode, through both the contiguous and the two-walk (send) paths, with and without
//! demotion of zero-copy leaves.

use cornflakes::handwritten::{GetM, Inner, Outer};
use cornflakes::mem::{HugePages, MemoryConfig};
use cornflakes::wire::Demote;
use cornflakes::{
    Arena, CFBytes, CFPtr, CFString, CornflakesObj, DecodeObj, PinnedMemory, PinnedRef, RcBuf,
};
use proptest::prelude::*;

/// A leaf value: its bytes and whether the source lives in pinned memory.
#[derive(Clone, Debug)]
struct LeafSpec {
    bytes: Vec<u8>,
    pinned: bool,
}

fn leaf() -> impl Strategy<Value = LeafSpec> {
    let len = prop_oneof![0usize..16, 500usize..530, 1000usize..3000];
    (len, any::<bool>(), any::<u8>()).prop_map(|(n, pinned, seed)| LeafSpec {
        bytes: (0..n).map(|i| seed.wrapping_add(i as u8)).collect(),
        pinned,
    })
}

#[derive(Clone, Debug)]
struct InnerSpec {
    b: Option<LeafSpec>,
    f: Option<bool>,
}

#[derive(Clone, Debug)]
struct OuterSpec {
    a: Option<u64>,
    inner: Option<InnerSpec>,
    list: Option<Vec<InnerSpec>>,
    nums: Option<Vec<i32>>,
}

#[derive(Clone, Debug)]
struct GetMSpec {
    id: Option<u32>,
    keys: Option<Vec<String>>,
    vals: Option<Vec<LeafSpec>>,
}

fn inner_spec() -> impl Strategy<Value = InnerSpec> {
    (
        proptest::option::of(leaf()),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(b, f)| InnerSpec { b, f })
}

fn outer_spec() -> impl Strategy<Value = OuterSpec> {
    (
        proptest::option::of(any::<u64>()),
        proptest::option::of(inner_spec()),
        proptest::option::of(proptest::collection::vec(inner_spec(), 0..5)),
        proptest::option::of(proptest::collection::vec(any::<i32>(), 0..10)),
    )
        .prop_map(|(a, inner, list, nums)| OuterSpec {
            a,
            inner,
            list,
            nums,
        })
}

fn getm_spec() -> impl Strategy<Value = GetMSpec> {
    (
        proptest::option::of(any::<u32>()),
        proptest::option::of(proptest::collection::vec("\\PC{0,40}", 0..5)),
        proptest::option::of(proptest::collection::vec(leaf(), 0..6)),
    )
        .prop_map(|(id, keys, vals)| GetMSpec { id, keys, vals })
}

/// Keeps pinned copies of leaf sources alive for the object's lifetime.
struct Sources {
    mem: PinnedMemory,
    held: Vec<RcBuf>,
}

impl Sources {
    fn ptr<'a>(&mut self, l: &LeafSpec, arena: &'a Arena) -> CFPtr<'a> {
        if l.pinned && !l.bytes.is_empty() {
            let b = self.mem.alloc_copy(&l.bytes).unwrap();
            let p = CFPtr::new(&b, arena);
            self.held.push(b);
            p
        } else {
            CFPtr::new(&l.bytes, arena)
        }
    }
}

fn build_inner<'a>(s: &InnerSpec, src: &mut Sources, arena: &'a Arena) -> Inner<'a> {
    let mut m = Inner::new_in(arena);
    if let Some(b) = &s.b {
        m.set_b(CFBytes(src.ptr(b, arena)));
    }
    if let Some(f) = s.f {
        m.set_f(f);
    }
    m
}

fn build_outer<'a>(s: &OuterSpec, src: &mut Sources, arena: &'a Arena) -> Outer<'a> {
    let mut m = Outer::new_in(arena);
    if let Some(a) = s.a {
        m.set_a(a);
    }
    if let Some(i) = &s.inner {
        m.set_in(build_inner(i, src, arena));
    }
    if let Some(l) = &s.list {
        m.init_list(l.len());
        for e in l {
            let e = build_inner(e, src, arena);
            m.get_mut_list().append(e);
        }
    }
    if let Some(n) = &s.nums {
        m.init_nums(n.len());
        for &x in n {
            m.get_mut_nums().append(x);
        }
    }
    m
}

fn check_inner(s: &InnerSpec, m: &Inner<'_>) {
    assert_eq!(m.has_b(), s.b.is_some());
    assert_eq!(
        m.get_b().as_bytes(),
        s.b.as_ref().map(|l| &l.bytes[..]).unwrap_or(&[])
    );
    assert_eq!(m.has_f(), s.f.is_some());
    assert_eq!(m.get_f(), s.f.unwrap_or(false));
}

fn check_outer(s: &OuterSpec, m: &Outer<'_>) {
    assert_eq!(m.get_a(), s.a.unwrap_or(0));
    match (&s.inner, m.get_in()) {
        (Some(si), Some(mi)) => check_inner(si, mi),
        (None, None) => {}
        _ => panic!("presence of `in` differs"),
    }
    let list = s.list.clone().unwrap_or_default();
    assert_eq!(m.get_list().len(), list.len());
    for (si, mi) in list.iter().zip(m.get_list().iter()) {
        check_inner(si, mi);
    }
    assert_eq!(
        m.get_nums().as_slice(),
        &s.nums.clone().unwrap_or_default()[..]
    );
}

/// Sends `obj` the way a datapath does (first entry + zero-copy entries, with demotion down to
/// `max_zc` entries) and returns the wire bytes and the number of scatter-gather entries.
fn two_walk<O: CornflakesObj>(obj: &O, max_zc: usize) -> (Vec<u8>, usize) {
    let s = obj.sizes();
    let (plan, demoted) = if s.zero_copy_count > max_zc {
        Demote::plan(&obj.zero_copy_lens(), max_zc)
    } else {
        (Demote::NONE, 0)
    };
    let mut wire = vec![0u8; s.head() + demoted];
    obj.write_header_and_copy(&s, &mut wire, plan, demoted)
        .expect("sized by the plan");
    let mut entries = 1;
    let mut walk = plan;
    obj.for_each_zero_copy(&mut walk, &mut |b: PinnedRef<'_>| {
        wire.extend_from_slice(&b);
        entries += 1;
    });
    // The one-walk send (each leaf handed over as its slot is written) gives the same head
    // and the same leaves in the same order.
    let mut one = vec![0u8; s.head() + demoted];
    let mut leaves: Vec<u8> = Vec::new();
    let mut n = 1;
    let head = obj
        .write_head_and_leaves(&s, &mut one, plan, demoted, &mut |b: PinnedRef<'_>| {
            leaves.extend_from_slice(&b);
            n += 1;
        })
        .expect("sized by the plan");
    assert_eq!(head, s.head() + demoted);
    one.extend_from_slice(&leaves);
    assert_eq!((&one, n), (&wire, entries), "one walk and two walks differ");
    (wire, entries)
}

fn mem() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn outer_roundtrips_in_every_mode(spec in outer_spec(), max_zc in 0usize..4) {
        let mem = mem();
        for threshold in [0, 512, usize::MAX] {
            let arena = Arena::with_memory(&mem).with_threshold(threshold);
            let mut src = Sources { mem: mem.clone(), held: Vec::new() };
            let obj = build_outer(&spec, &mut src, &arena);
            let s = obj.sizes();
            let bytes = obj.serialize_to_vec();
            prop_assert_eq!(bytes.len(), s.total());
            if threshold == usize::MAX {
                prop_assert_eq!(s.zero_copy_count, 0);
            }
            // Contiguous and two-walk agree when nothing is demoted.
            let (wire, entries) = two_walk(&obj, usize::MAX);
            prop_assert_eq!(&wire, &bytes);
            prop_assert_eq!(entries, 1 + s.zero_copy_count);
            // Decode from plain bytes and from a pinned packet.
            let rx_arena = Arena::with_memory(&mem).with_threshold(threshold);
            check_outer(&spec, &Outer::deserialize_bytes(&bytes, &rx_arena).unwrap());
            let pkt = mem.alloc_copy(&bytes).unwrap_or_else(|_| panic!("packet of {} bytes", bytes.len()));
            let back = Outer::deserialize_rcbuf(&pkt, &rx_arena).unwrap();
            check_outer(&spec, &back);
            // Re-encoding may lay leaves out differently (a leaf copied on send can come back as
            // a zero-copy reference to the pinned packet), but it holds the same object.
            let again = back.serialize_to_vec();
            check_outer(&spec, &Outer::deserialize_bytes(&again, &rx_arena).unwrap());
            // Demotion to at most max_zc entries: a different layout, the same object.
            let (demoted, entries) = two_walk(&obj, max_zc);
            prop_assert!(entries <= 1 + max_zc.min(s.zero_copy_count));
            prop_assert_eq!(demoted.len(), s.total());
            check_outer(&spec, &Outer::deserialize_bytes(&demoted, &rx_arena).unwrap());
            drop(back);
            // A send's references (one per entry, in order: the wire's tail) outlive the
            // object, which holds none of its own.
            let mut lent = Vec::new();
            let mut keep_all = Demote::NONE;
            obj.for_each_zero_copy(&mut keep_all, &mut |b: PinnedRef<'_>| lent.push(b.to_rcbuf()));
            prop_assert_eq!(lent.len(), s.zero_copy_count);
            drop(obj);
            let tail: Vec<u8> = lent.iter().flat_map(|b| b.to_vec()).collect();
            prop_assert_eq!(&tail[..], &bytes[s.head()..]);
            drop(lent);
            drop(src);
            prop_assert_eq!(pkt.ref_count(), 1);
        }
        prop_assert_eq!(mem.stats().live_items, 0);
    }

    #[test]
    fn getm_roundtrips_in_every_mode(spec in getm_spec(), max_zc in 0usize..4) {
        let mem = mem();
        for threshold in [0, 512, usize::MAX] {
            let arena = Arena::with_memory(&mem).with_threshold(threshold);
            let mut src = Sources { mem: mem.clone(), held: Vec::new() };
            let mut m = GetM::new_in(&arena);
            if let Some(id) = spec.id { m.set_id(id); }
            if let Some(keys) = &spec.keys {
                m.init_keys(keys.len());
                for k in keys { m.get_mut_keys().append(CFString::new(k, &arena)); }
            }
            if let Some(vals) = &spec.vals {
                m.init_vals(vals.len());
                for v in vals { let p = src.ptr(v, &arena); m.get_mut_vals().append(CFBytes(p)); }
            }
            let bytes = m.serialize_to_vec();
            prop_assert_eq!(two_walk(&m, usize::MAX).0, bytes.clone());
            for wire in [bytes.clone(), two_walk(&m, max_zc).0] {
                let back = GetM::deserialize(&wire, &arena).unwrap();
                prop_assert_eq!(back.get_id(), spec.id.unwrap_or(0));
                prop_assert_eq!(back.has_keys(), spec.keys.is_some());
                let keys: Vec<String> = back.get_keys().iter().map(|k| k.as_str().unwrap().to_string()).collect();
                prop_assert_eq!(keys, spec.keys.clone().unwrap_or_default());
                let vals: Vec<Vec<u8>> = back.get_vals().iter().map(|v| v.as_bytes().to_vec()).collect();
                let want: Vec<Vec<u8>> = spec.vals.clone().unwrap_or_default().into_iter().map(|l| l.bytes).collect();
                prop_assert_eq!(vals, want);
            }
        }
    }
}

#[test]
fn demotion_picks_the_smallest_entries_with_ties_in_wire_order() {
    let (plan, bytes) = Demote::plan(&[600, 512, 900, 512, 512], 3);
    assert_eq!(bytes, 1024);
    let mut p = plan;
    let kept: Vec<bool> = [600, 512, 900, 512, 512]
        .iter()
        .map(|&l| p.keep_zero_copy(l))
        .collect();
    assert_eq!(kept, [true, false, true, false, true]);
    assert_eq!(Demote::plan(&[1, 2], 2), (Demote::NONE, 0));
}
