//! The C API called from Rust (so the nightly AddressSanitizer run of scripts/test.sh checks the
//! library's own code, not only the C side): handles, references, messages, resets.

use std::ptr;

use cornflakes_c::*;

fn ok(s: cf_status) {
    assert_eq!(s, cf_status::CF_OK, "{}", last());
}

fn last() -> String {
    // SAFETY: cf_last_error returns a valid NUL-terminated string owned by the library.
    unsafe { std::ffi::CStr::from_ptr(cf_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn buffers_messages_and_stale_handles() {
    let mut mem = cf_mem { id: 0 };
    ok(cf_mem_new(&mut mem));
    let data = vec![9u8; 1000];
    let mut b = cf_buf { id: 0 };
    ok(cf_buf_alloc(mem, data.as_ptr(), data.len(), &mut b));

    let schema_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/kv.proto\0");
    let mut s = cf_schema { id: 0 };
    ok(cf_schema_load(
        schema_path.as_ptr().cast(),
        ptr::null(),
        &mut s,
    ));
    let mut ty = 0u32;
    ok(cf_schema_message(s, c"kv.GetMResp".as_ptr(), &mut ty));
    let mut vals = 0u32;
    ok(cf_schema_field(s, ty, c"vals".as_ptr(), &mut vals));

    let mut a = cf_arena { id: 0 };
    ok(cf_arena_new(mem, &mut a));
    ok(cf_arena_set_threshold(a, 512));
    let mut m = cf_msg { id: 0 };
    ok(cf_msg_new(a, s, ty, &mut m));
    ok(cf_msg_append_buf(m, vals, b));
    ok(cf_msg_append_bytes(m, vals, b"small".as_ptr(), 5));
    let mut rc = 0u32;
    ok(cf_buf_refcount(b, &mut rc));
    assert_eq!(rc, 2, "the 1000-byte value is referenced, not copied");

    let mut len = 0usize;
    ok(cf_msg_serialized_len(m, &mut len));
    let mut wire = vec![0u8; len];
    ok(cf_msg_serialize(m, wire.as_mut_ptr(), wire.len(), &mut len));
    let mut back = cf_msg { id: 0 };
    ok(cf_msg_decode(a, s, ty, wire.as_ptr(), len, &mut back));
    let (mut p, mut n) = (ptr::null(), 0usize);
    ok(cf_msg_get_bytes_at(back, vals, 0, &mut p, &mut n));
    // SAFETY: the library returned `n` bytes at `p`, valid while `back` is live.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, n) }, &data[..]);

    ok(cf_arena_reset(a));
    ok(cf_buf_refcount(b, &mut rc));
    assert_eq!(rc, 1, "the reset released the message's reference");
    assert_eq!(cf_msg_release(m), cf_status::CF_ERR_BAD_HANDLE);
    assert!(last().contains("stale"), "{}", last());
    // A successful call empties the message, and the next one leaves it empty.
    ok(cf_buf_refcount(b, &mut rc));
    assert_eq!(last(), "");
    ok(cf_buf_refcount(b, &mut rc));
    assert_eq!(last(), "");
    assert_eq!(cf_msg_release(m), cf_status::CF_ERR_BAD_HANDLE);
    assert_eq!(
        cf_buf_release(cf_buf { id: mem.id }),
        cf_status::CF_ERR_BAD_HANDLE
    );
    assert_eq!(cf_mem_new(ptr::null_mut()), cf_status::CF_ERR_NULL);

    ok(cf_buf_release(b));
    ok(cf_arena_release(a));
    ok(cf_schema_release(s));
    ok(cf_mem_release(mem));
}

/// A released handle stays refused once its slot holds a new entry: releasing bumps the slot's
/// generation, so the old handle names nothing, and calls with it leave the new entry alone.
#[test]
fn a_released_handle_is_refused_after_its_slot_is_reused() {
    let mut mem = cf_mem { id: 0 };
    ok(cf_mem_new(&mut mem));
    let mut old = cf_buf { id: 0 };
    ok(cf_buf_alloc(mem, b"old".as_ptr(), 3, &mut old));
    ok(cf_buf_release(old));
    let mut new = cf_buf { id: 0 };
    ok(cf_buf_alloc(mem, b"the new value".as_ptr(), 13, &mut new));
    // The table hands the released slot out again (bits 0-23 of a handle name the slot,
    // src/table.rs), so this is the reuse the generation guards against.
    let slot = |h: u64| h & ((1 << 24) - 1);
    assert_eq!(slot(new.id), slot(old.id), "the slot was reused");
    assert_ne!(new.id, old.id, "a reused slot gives a new handle");

    let (mut p, mut n, mut rc) = (ptr::null(), 0usize, 0u32);
    for (what, st) in [
        ("data", cf_buf_data(old, &mut p, &mut n)),
        ("refcount", cf_buf_refcount(old, &mut rc)),
        ("retain", cf_buf_retain(old, &mut cf_buf { id: 0 })),
        ("release", cf_buf_release(old)),
    ] {
        assert_eq!(
            st,
            cf_status::CF_ERR_BAD_HANDLE,
            "{what} with the old handle"
        );
        assert!(last().contains("stale"), "{what}: {}", last());
    }
    // The new entry is untouched: its bytes, and one reference (the old handle released none).
    ok(cf_buf_data(new, &mut p, &mut n));
    // SAFETY: the library returned `n` bytes at `p`, valid while `new` is live.
    assert_eq!(
        unsafe { std::slice::from_raw_parts(p, n) },
        b"the new value"
    );
    ok(cf_buf_refcount(new, &mut rc));
    assert_eq!(rc, 1);
    ok(cf_buf_release(new));
    ok(cf_mem_release(mem));
}

#[test]
fn handles_do_not_cross_threads() {
    let mut mem = cf_mem { id: 0 };
    ok(cf_mem_new(&mut mem));
    let id = mem.id;
    let st = std::thread::spawn(move || cf_mem_release(cf_mem { id }))
        .join()
        .unwrap();
    assert_eq!(st, cf_status::CF_ERR_BAD_HANDLE);
    ok(cf_mem_release(mem));
}
