//! Pinned memory and buffers: allocate, copy in, retain, slice, release, recover.

use cornflakes::mem::AllocError;
use cornflakes::PinnedMemory;

use crate::error::{bytes, cf_status, guard, out, Error, Result};
use crate::table::{self, cf_buf, cf_mem, Entry};

pub(crate) fn alloc_error(e: AllocError) -> Error {
    let status = match e {
        AllocError::InvalidConfig(_) => cf_status::CF_ERR_INVALID,
        _ => cf_status::CF_ERR_ALLOC,
    };
    Error::new(status, e.to_string())
}

pub(crate) fn mem_of(t: &table::Table, mem: cf_mem) -> Result<&PinnedMemory> {
    match t.get(mem.id, "cf_mem")? {
        Entry::Mem(m) => Ok(m),
        _ => unreachable!("checked kind"),
    }
}

pub(crate) fn buf_of(t: &table::Table, buf: cf_buf) -> Result<&cornflakes::RcBuf> {
    match t.get(buf.id, "cf_buf")? {
        Entry::Buf(b) => Ok(b),
        _ => unreachable!("checked kind"),
    }
}

/// Creates pinned memory with the default configuration (size classes 64 B to 16 KiB, hugepages
/// when reserved, growing on demand). Release it with `cf_mem_release`; buffers allocated from it
/// stay valid until they are released too.
#[no_mangle]
pub extern "C" fn cf_mem_new(out_mem: *mut cf_mem) -> cf_status {
    guard("cf_mem_new", || {
        let m = PinnedMemory::with_defaults().map_err(alloc_error)?;
        let id = table::with(|t| t.insert(Entry::Mem(m)))?;
        out(out_mem, "out_mem", cf_mem { id })
    })
}

/// Releases a handle to pinned memory (the memory stays mapped while buffers, arenas or
/// datapaths still use it).
#[no_mangle]
pub extern "C" fn cf_mem_release(mem: cf_mem) -> cf_status {
    guard("cf_mem_release", || {
        table::with(|t| t.remove(mem.id, "cf_mem")).map(drop)
    })
}

/// The largest buffer `cf_buf_alloc` can return (bytes); a longer value must be split.
#[no_mangle]
pub extern "C" fn cf_mem_max_len(mem: cf_mem, out_len: *mut usize) -> cf_status {
    guard("cf_mem_max_len", || {
        let n = table::with(|t| Ok(mem_of(t, mem)?.max_item_size()))?;
        out(out_len, "out_len", n)
    })
}

/// Allocates a buffer of `len` bytes in pinned memory and copies `data` into it. The buffer is
/// immutable from then on: a program that wants to change a value allocates a new one (so a
/// send that still holds the old bytes sends them unchanged).
#[no_mangle]
pub extern "C" fn cf_buf_alloc(
    mem: cf_mem,
    data: *const u8,
    len: usize,
    out_buf: *mut cf_buf,
) -> cf_status {
    guard("cf_buf_alloc", || {
        let data = bytes(data, len, "data")?;
        let id = table::with(|t| {
            let b = mem_of(t, mem)?.alloc_copy(data).map_err(alloc_error)?;
            t.insert(Entry::Buf(b))
        })?;
        out(out_buf, "out_buf", cf_buf { id })
    })
}

/// Allocates a buffer holding `a` followed by `b` (for building a value from two pieces, such
/// as APPEND, without a temporary copy).
#[no_mangle]
pub extern "C" fn cf_buf_alloc_concat(
    mem: cf_mem,
    a: *const u8,
    a_len: usize,
    b: *const u8,
    b_len: usize,
    out_buf: *mut cf_buf,
) -> cf_status {
    guard("cf_buf_alloc_concat", || {
        let (a, b) = (bytes(a, a_len, "a")?, bytes(b, b_len, "b")?);
        let len = a_len
            .checked_add(b_len)
            .ok_or_else(|| Error::new(cf_status::CF_ERR_TOO_LARGE, "a_len + b_len overflows"))?;
        let id = table::with(|t| {
            let mut m = mem_of(t, mem)?.alloc(len).map_err(alloc_error)?;
            m[..a_len].copy_from_slice(a);
            m[a_len..].copy_from_slice(b);
            t.insert(Entry::Buf(m.freeze()))
        })?;
        out(out_buf, "out_buf", cf_buf { id })
    })
}

/// The buffer's bytes: `*out_data` stays valid (and unchanged) while this handle is live.
#[no_mangle]
pub extern "C" fn cf_buf_data(
    buf: cf_buf,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> cf_status {
    guard("cf_buf_data", || {
        let (p, n) = table::with(|t| {
            let b = buf_of(t, buf)?;
            Ok((b.as_ptr(), b.len()))
        })?;
        out(out_data, "out_data", p)?;
        out(out_len, "out_len", n)
    })
}

/// A new handle to the same bytes (one more reference). Release each handle once.
#[no_mangle]
pub extern "C" fn cf_buf_retain(buf: cf_buf, out_buf: *mut cf_buf) -> cf_status {
    guard("cf_buf_retain", || {
        let id = table::with(|t| {
            let b = buf_of(t, buf)?
                .try_clone()
                .map_err(|e| Error::new(cf_status::CF_ERR_OVERFLOW, e.to_string()))?;
            t.insert(Entry::Buf(b))
        })?;
        out(out_buf, "out_buf", cf_buf { id })
    })
}

/// A new handle to `len` bytes of `buf` from `offset` (one more reference to the same memory).
#[no_mangle]
pub extern "C" fn cf_buf_slice(
    buf: cf_buf,
    offset: usize,
    len: usize,
    out_buf: *mut cf_buf,
) -> cf_status {
    guard("cf_buf_slice", || {
        let id = table::with(|t| {
            let b = buf_of(t, buf)?;
            let total = b.len();
            let s = b
                .try_slice(offset, len)
                .map_err(|e| Error::new(cf_status::CF_ERR_OVERFLOW, e.to_string()))?
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "offset {offset} + len {len} is past the buffer's {total} bytes"
                    ))
                })?;
            t.insert(Entry::Buf(s))
        })?;
        out(out_buf, "out_buf", cf_buf { id })
    })
}

/// How many references the buffer's memory has: this handle, other handles to it, messages
/// that reference it and sends not yet completed. 1 means this handle is the only one, so
/// nothing else can be reading it.
#[no_mangle]
pub extern "C" fn cf_buf_refcount(buf: cf_buf, out_count: *mut u32) -> cf_status {
    guard("cf_buf_refcount", || {
        let n = table::with(|t| Ok(buf_of(t, buf)?.ref_count()))?;
        out(out_count, "out_count", n)
    })
}

/// Releases one reference; the memory is reused when the last reference (handles, messages,
/// sends in flight) is gone. The handle is invalid afterwards.
#[no_mangle]
pub extern "C" fn cf_buf_release(buf: cf_buf) -> cf_status {
    guard("cf_buf_release", || {
        table::with(|t| t.remove(buf.id, "cf_buf")).map(drop)
    })
}

/// Pointer recovery: when `data[0..len]` lies wholly inside one live buffer of `mem`, a new
/// reference to exactly those bytes; else `*out_buf` is `{0}` and the call still succeeds
/// (`CF_OK`), so the caller can fall back to copying.
#[no_mangle]
pub extern "C" fn cf_mem_recover(
    mem: cf_mem,
    data: *const u8,
    len: usize,
    out_buf: *mut cf_buf,
) -> cf_status {
    guard("cf_mem_recover", || {
        let data = bytes(data, len, "data")?;
        let id = table::with(|t| {
            match mem_of(t, mem)?
                .try_recover_ptr(data)
                .map_err(|e| Error::new(cf_status::CF_ERR_OVERFLOW, e.to_string()))?
            {
                Some(b) => t.insert(Entry::Buf(b)),
                None => Ok(0),
            }
        })?;
        out(out_buf, "out_buf", cf_buf { id })
    })
}
