//! Instruction-count harness for the serialize-and-send path (run under callgrind).
//!
//! Builds `GetM { id; vals }` with pinned values and "sends" it the way a datapath does: sizes,
//! header + copy area into a reused transmit buffer, one descriptor per zero-copy entry into a
//! reused descriptor array. `N` iterations; compare two runs to get instructions per message:
//!
//! ```text
//! GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824 \
//!   valgrind --tool=callgrind --toggle-collect="*build_and_send*" target/release/examples/count_send 2x2048 1000
//! ```
//! Collected instructions / N = instructions per message (the harness outside the toggled
//! function is not counted). `*build_object*` and `*send_object*` split the total.

use std::hint::black_box;

use cornflakes::handwritten::GetM;
use cornflakes::wire::Demote;
use cornflakes::{Arena, CFBytes, CornflakesObj, PinnedMemory, RcBuf};

/// What a transmit descriptor holds: address, length, and the buffer kept until completion.
struct Desc {
    addr: u64,
    len: u32,
    buf: Option<RcBuf>,
}

/// The application's side of one request: build `GetM { id; vals }` in the arena.
macro_rules! build {
    ($arena:expr, $values:expr, $id:expr) => {{
        let mut m = GetM::new_in($arena);
        m.set_id($id);
        m.init_vals($values.len());
        for v in $values {
            m.get_mut_vals()
                .append(CFBytes::new(black_box(&v[..]), $arena));
        }
        m
    }};
}

/// Serialize-and-send up to the descriptors being written: sizes, header + copy area into the
/// transmit buffer after a 42-byte packet header, one descriptor per zero-copy entry.
macro_rules! send {
    ($m:expr, $tx:expr, $ring:expr) => {{
        let m = &$m;
        let s = m.sizes();
        let head = match m.write_header_and_copy(&s, &mut $tx[42..], Demote::NONE, 0) {
            Ok(n) => n,
            Err(_) => return 0,
        };
        $ring[0].addr = $tx.as_ptr() as u64;
        $ring[0].len = (42 + head) as u32;
        let mut slot = 1;
        let mut keep = Demote::NONE;
        m.for_each_zero_copy(&mut keep, &mut |b: &RcBuf| {
            let d = &mut $ring[slot];
            d.addr = b.as_ptr() as u64;
            d.len = b.len() as u32;
            d.buf = Some(b.clone());
            slot += 1;
        });
        slot
    }};
}

/// Build alone (`--toggle-collect="*build_object*"`); the object is returned by value, which
/// adds a copy of the struct that the combined function does not have.
#[inline(never)]
fn build_object<'a>(arena: &'a Arena, values: &[RcBuf], id: u32) -> GetM<'a> {
    build!(arena, values, id)
}

/// Serialize-and-send alone (`--toggle-collect="*send_object*"`).
#[inline(never)]
fn send_object(m: &GetM<'_>, tx: &mut [u8], ring: &mut [Desc]) -> usize {
    send!(*m, tx, ring)
}

/// Build, send and drop the object in one function: the whole per-message cost of the
/// application side (`--toggle-collect="*build_and_send*"`).
#[inline(never)]
fn build_and_send(
    arena: &Arena,
    values: &[RcBuf],
    id: u32,
    tx: &mut [u8],
    ring: &mut [Desc],
) -> usize {
    let m = build!(arena, values, id);
    send!(m, tx, ring)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let shape = args.next().unwrap_or_else(|| "2x2048".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    // "combined" (default): build_and_send; "split": build_object then send_object.
    let mode = args.next().unwrap_or_else(|| "combined".into());
    let (count, size) = match shape.as_str() {
        "2x2048" => (2, 2048),
        "1x64" => (1, 64),
        other => {
            eprintln!("unknown shape {other}; use 2x2048 or 1x64");
            std::process::exit(2);
        }
    };
    let mem = PinnedMemory::with_defaults().expect("pinned memory");
    let values: Vec<RcBuf> = (0..count)
        .map(|i| mem.alloc_copy(&vec![i as u8; size]).unwrap())
        .collect();
    let mut arena = Arena::with_memory(&mem);
    let mut tx = vec![0u8; 9000];
    let mut ring: Vec<Desc> = (0..64)
        .map(|_| Desc {
            addr: 0,
            len: 0,
            buf: None,
        })
        .collect();
    let mut total = 0usize;
    for i in 0..n {
        let used = match mode.as_str() {
            "split" => {
                let m = build_object(&arena, &values, i as u32);
                send_object(&m, &mut tx, &mut ring)
            }
            _ => build_and_send(&arena, &values, i as u32, &mut tx, &mut ring),
        };
        total += used;
        // completion: the device is done; release the references
        for d in &mut ring[1..used] {
            d.buf = None;
        }
        arena.reset();
    }
    println!("{n} messages, {total} descriptors");
}
