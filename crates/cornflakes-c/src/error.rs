//! Status codes, the per-thread error message and the panic guard every entry point runs in.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call did. `CF_OK` is 0; every error is negative and leaves a message for
/// [`cf_last_error`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum cf_status {
    /// Success.
    CF_OK = 0,
    /// A required pointer argument was NULL.
    CF_ERR_NULL = -1,
    /// A handle that is zero, released, invalidated (its arena was reset or freed), of another
    /// kind, or made on another thread.
    CF_ERR_BAD_HANDLE = -2,
    /// An argument out of range or of the wrong type: no such field or message, an index past
    /// the end, a value that does not fit the field, text that is not UTF-8.
    CF_ERR_INVALID = -3,
    /// Pinned memory is exhausted, or the length is larger than one pinned item.
    CF_ERR_ALLOC = -4,
    /// Malformed bytes: an object that does not decode, a `.proto` that does not parse.
    CF_ERR_DECODE = -5,
    /// An operating-system error (socket setup, send, receive).
    CF_ERR_IO = -6,
    /// Nothing was done now, try again later: the transmit queue is full (flush first), or the
    /// peer's address is being resolved.
    CF_ERR_AGAIN = -7,
    /// The message or object is larger than the datapath or the output buffer accepts.
    CF_ERR_TOO_LARGE = -8,
    /// A bug in the library (a Rust panic, caught at the boundary). The library is still
    /// usable, but the handles the failed call touched may be in any valid state.
    CF_ERR_INTERNAL = -9,
    /// A reference count would pass its maximum (2^31 - 1 references to one buffer).
    CF_ERR_OVERFLOW = -10,
    /// Not in this build or not on this datapath: a datapath whose cargo feature the library
    /// was built without (`cf_dp_kinds` lists those built in), or `cf_dp_fd` on a datapath
    /// without a file descriptor.
    CF_ERR_UNSUPPORTED = -11,
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// An error on its way to C: a status and a message.
#[derive(Debug)]
pub(crate) struct Error {
    pub status: cf_status,
    pub msg: String,
}

impl Error {
    pub fn new(status: cf_status, msg: impl Into<String>) -> Error {
        Error {
            status,
            msg: msg.into(),
        }
    }
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::new(cf_status::CF_ERR_INVALID, msg)
    }
    pub fn null(what: &str) -> Error {
        Error::new(cf_status::CF_ERR_NULL, format!("{what} is NULL"))
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

fn set_last(msg: &str) {
    // Interior NULs would cut the message short: show them instead.
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Empties the message after a successful call: nothing to allocate or free when it is empty
/// already (every call in a row of successes; this runs on each entry point's fast path).
fn clear_last() {
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        if !l.as_bytes().is_empty() {
            *l = CString::default();
        }
    });
}

/// Runs one entry point: `Ok` is `CF_OK` (and clears the message), an error sets the message,
/// a panic is caught and reported as `CF_ERR_INTERNAL`.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> Result<()>) -> cf_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            clear_last();
            cf_status::CF_OK
        }
        Ok(Err(e)) => {
            set_last(&format!("{name}: {}", e.msg));
            e.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last(&format!("{name}: internal error (please report): {what}"));
            cf_status::CF_ERR_INTERNAL
        }
    }
}

/// The message of the last failed call on this thread ("" after a successful one). The string
/// belongs to the library and stays valid until the next call on this thread; copy it to keep it.
#[no_mangle]
pub extern "C" fn cf_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// The name of a status code (`"CF_ERR_BAD_HANDLE"`), a static string; `"CF_UNKNOWN"` for a
/// value that is no status.
#[no_mangle]
pub extern "C" fn cf_status_name(status: i32) -> *const c_char {
    let s: &std::ffi::CStr = match status {
        0 => c"CF_OK",
        -1 => c"CF_ERR_NULL",
        -2 => c"CF_ERR_BAD_HANDLE",
        -3 => c"CF_ERR_INVALID",
        -4 => c"CF_ERR_ALLOC",
        -5 => c"CF_ERR_DECODE",
        -6 => c"CF_ERR_IO",
        -7 => c"CF_ERR_AGAIN",
        -8 => c"CF_ERR_TOO_LARGE",
        -9 => c"CF_ERR_INTERNAL",
        -10 => c"CF_ERR_OVERFLOW",
        -11 => c"CF_ERR_UNSUPPORTED",
        _ => c"CF_UNKNOWN",
    };
    s.as_ptr()
}

/// Writes `v` through an out-pointer, refusing NULL.
pub(crate) fn out<T>(p: *mut T, what: &str, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: `p` is non-null, and the caller promises (header: "out-pointers") that a non-null
    // out-pointer points to writable, aligned storage for a `T`.
    unsafe { p.write(v) };
    Ok(())
}

/// The `len` bytes at `p` (NULL allowed when `len` is 0).
pub(crate) fn bytes<'a>(p: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes at `p` that stay unchanged
    // during the call (header: "pointers and lengths"); the slice does not outlive the call
    // unless copied.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A NUL-terminated UTF-8 string argument.
pub(crate) fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string valid during the call.
    let c = unsafe { std::ffi::CStr::from_ptr(p) };
    c.to_str()
        .map_err(|_| Error::invalid(format!("{what} is not valid UTF-8")))
}

/// Writes `v` as element `i` of the caller's array at `p` (non-null, with room for more than
/// `i` elements: checked or promised by the caller of the entry point).
pub(crate) fn write_at<T>(p: *mut T, i: usize, v: T) {
    // SAFETY: the entry point checked `p` for null and the C caller promises room for at least
    // `i + 1` elements (the `max` it passed is larger than `i`).
    unsafe { p.add(i).write(v) }
}

/// The caller's array of `n` values at `p` (NULL allowed when `n` is 0).
pub(crate) fn slice_of<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-null, and the caller promises `n` readable, initialised values at `p`,
    // unchanged during the call.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The caller's writable buffer of `n` bytes at `p` (NULL allowed when `n` is 0).
pub(crate) fn bytes_mut<'a>(p: *mut u8, n: usize, what: &str) -> Result<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-null, and the caller promises `n` writable bytes at `p` that nothing else
    // uses during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}
