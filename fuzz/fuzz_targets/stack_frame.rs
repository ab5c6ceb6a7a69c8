//! Target 3a: `EthStack::process_frame` on one arbitrary frame, once with software checksum
//! verification and once as if the device had verified checksums (so arbitrary IPv4/UDP and
//! framing headers get through). Never a panic; anything delivered fits the limits.
#![no_main]

use std::time::Instant;

use cornflakes_fuzz::frames::{stack, REASM_MAX_MESSAGE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mem = cornflakes_fuzz::memory();
    if data.len() > mem.max_item_size() {
        return;
    }
    let now = Instant::now();
    for verify in [true, false] {
        let mut s = stack(verify);
        let frame = mem.alloc_copy(data).expect("pinned buffer");
        let mut out = Vec::new();
        let mut replies = 0usize;
        s.process_frame(mem, frame, now, &mut out, &mut |f: &[u8]| {
            assert!(!f.is_empty());
            replies += 1;
        });
        assert!(out.len() <= 1);
        let c = s.counters();
        assert_eq!(c.delivered, out.len() as u64);
        for m in &out {
            assert!(m.data.len() <= data.len() && m.data.len() <= REASM_MAX_MESSAGE.max(1500));
        }
        assert!(replies <= 1);
    }
});
