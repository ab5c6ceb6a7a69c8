//! Sending an object through the datapath interface's `SendObject` (which every `CornflakesObj`
//! implements): the ablation's scatter-gather array and the demotion plan, on the fixtures.

use cornflakes::datapath::{object_to_sga, plan_demote, SendObject};
use cornflakes::handwritten::GetM;
use cornflakes::wire::Demote;
use cornflakes::{Arena, CFBytes, CFPtr, CornflakesObj, PinnedMemory};

fn getm<'a>(arena: &'a Arena, mem: &PinnedMemory, lens: &[usize]) -> GetM<'a> {
    let mut m = GetM::new_in(arena);
    m.set_id(3);
    m.init_vals(lens.len());
    for (i, &n) in lens.iter().enumerate() {
        let b = mem.alloc_copy(&vec![i as u8 + 1; n]).unwrap();
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(b, arena)));
    }
    m
}

#[test]
fn sga_concatenates_to_the_serialized_object() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, &[600, 10, 700, 800]);
    let flat = m.serialize_to_vec();
    for max in [1, 2, 3, 4, 16] {
        let sga = object_to_sga(&m, &mem, max).unwrap();
        assert!(sga.len() <= max.max(1), "{max}: {}", sga.len());
        let joined: Vec<u8> = sga.iter().flat_map(|b| b.iter().copied()).collect();
        if max >= 4 {
            // Nothing demoted: the same bytes as a contiguous serialization.
            assert_eq!(joined, flat, "max {max}");
        }
        // Demoted values move to the copy area; the object decodes the same.
        let a2 = Arena::new();
        let d = GetM::deserialize(&joined, &a2).unwrap();
        let vals: Vec<&[u8]> = d.get_vals().iter().map(|v| v.as_bytes()).collect();
        let want: Vec<&[u8]> = m.get_vals().iter().map(|v| v.as_bytes()).collect();
        assert_eq!((d.get_id(), vals), (3, want), "max {max}");
    }
}

#[test]
fn plan_demote_keeps_all_when_they_fit() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, &[600, 700]);
    assert_eq!(plan_demote(&m, &m.sizes(), 2), (Demote::NONE, 0));
    let (d, bytes) = plan_demote(&m, &m.sizes(), 1);
    assert_ne!(d, Demote::NONE);
    assert_eq!(bytes, 600);
}

#[test]
fn send_object_forwards_to_the_objects_own_methods() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, &mem, &[600, 10, 700]);
    assert_eq!(m.object_sizes(), m.sizes());
    assert_eq!(m.object_leaf_lens(), m.zero_copy_lens());
    assert_eq!(m.object_leaf_lens(), [600, 700]);
    assert_eq!(m.object_to_vec(), m.serialize_to_vec());
    let s = m.object_sizes();
    let mut a = vec![0u8; s.head()];
    let mut b = vec![0u8; s.head()];
    assert_eq!(
        m.write_object_head(&s, &mut a, Demote::NONE, 0).unwrap(),
        m.write_header_and_copy(&s, &mut b, Demote::NONE, 0)
            .unwrap()
    );
    assert_eq!(a, b);
    let short = m.write_object_head(&s, &mut a[..s.head() - 1], Demote::NONE, 0);
    assert_eq!(short.unwrap_err().needed, s.head());
    let mut lens = Vec::new();
    let mut keep_all = Demote::NONE;
    m.for_each_object_leaf(&mut keep_all, &mut |b: cornflakes::PinnedRef<'_>| {
        lens.push(b.len())
    });
    assert_eq!(lens, [600, 700]);
}
