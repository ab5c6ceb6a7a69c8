//! A tour of the hybrid serializer: builds a `GetM` reply whose values are partly small, partly
//! large and pinned, partly large but on the heap; shows which fields are copied and which go
//! out by scatter-gather, the scatter-gather entries a datapath would post, and the decoded
//! result. `cargo run --release -p cornflakes-runtime --example demo`

use cornflakes::handwritten::GetM;
use cornflakes::{
    Arena, CFBytes, CFString, CornflakesObj, DecodeObj, PinnedMemory, PinnedRef, RcBuf, SendPlan,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mem = PinnedMemory::with_defaults()?;
    println!("pinned memory: {:?}", mem.stats());
    // Values a KV store keeps in pinned memory, and one it keeps on the heap.
    let stored: Vec<RcBuf> = [64usize, 2048, 4096]
        .iter()
        .map(|&n| mem.alloc_copy(&vec![b'v'; n]))
        .collect::<Result<_, _>>()?;
    let heap_value = vec![b'h'; 3000];

    for threshold in [512, 0, usize::MAX] {
        let arena = Arena::with_memory(&mem).with_threshold(threshold);
        let mut reply = GetM::new_in(&arena);
        reply.set_id(42);
        reply.init_keys(1);
        reply
            .get_mut_keys()
            .append(CFString::new("user:17", &arena));
        reply.init_vals(4);
        for v in &stored {
            reply.get_mut_vals().append(CFBytes::new(v, &arena));
        }
        reply
            .get_mut_vals()
            .append(CFBytes::new(&heap_value, &arena));

        let s = reply.sizes();
        let label = match threshold {
            usize::MAX => "copy only".to_string(),
            0 => "scatter-gather whenever pinned".to_string(),
            t => format!("hybrid, threshold {t} B"),
        };
        println!("\n== {label}");
        for (i, v) in reply.get_vals().iter().enumerate() {
            let how = if v.ptr().is_zero_copy() {
                "zero-copy"
            } else {
                "copied"
            };
            println!("  vals[{i}]: {:>5} B {how}", v.len());
        }
        println!(
            "  wire: header {} B + copy area {} B + {} zero-copy entries ({} B) = {} B",
            s.header,
            s.copy,
            s.zero_copy_count,
            s.zero_copy_len,
            s.total()
        );
        // What a datapath posts: one entry for header + copy area, one per zero-copy leaf.
        let plan = SendPlan::with_sizes(&reply, s, usize::MAX);
        let mut head = vec![0u8; plan.head_len()];
        plan.write_head(&mut head)?;
        let mut entries = vec![head.len()];
        let mut wire = head;
        plan.for_each_zero_copy(|b: PinnedRef<'_>| {
            entries.push(b.len());
            wire.extend_from_slice(&b);
        });
        println!("  scatter-gather entries: {entries:?}");
        let rx = Arena::new();
        let back = GetM::deserialize_bytes(&wire, &rx)?;
        assert_eq!(back.get_vals().len(), 4);
        for (got, sent) in back.get_vals().iter().zip(reply.get_vals().iter()) {
            assert_eq!(
                got.as_bytes(),
                sent.as_bytes(),
                "decoded value differs from the sent one"
            );
        }
        assert_eq!(back.get_keys()[0].as_str()?, "user:17");
        println!(
            "  decoded: id {}, key {:?}, {} values — identical",
            back.get_id(),
            back.get_keys()[0].as_str()?,
            back.get_vals().len()
        );
    }
    Ok(())
}
