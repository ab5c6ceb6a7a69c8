//! Writing RESP: replies (the server side) and commands (the client side), into any [`Out`]:
//! a `Vec<u8>`, a caller's fixed buffer ([`SliceOut`], e.g. a pinned transmit buffer), or a
//! [`Len`] that only counts, to size that buffer first. Nothing here allocates but a
//! `Vec<u8>` growing.

/// Where RESP is written. The provided methods write one element each.
pub trait Out {
    /// Appends raw bytes.
    fn put(&mut self, bytes: &[u8]);

    /// A simple string, `+OK\r\n` (`s` must not contain CR or LF).
    fn simple(&mut self, s: &[u8]) {
        self.put(b"+");
        self.put(s);
        self.put(b"\r\n");
    }

    /// An error, `-WORD message\r\n`: the first word names the error, as Redis's `-ERR` and
    /// `-WRONGTYPE` do (neither may contain CR or LF).
    fn error(&mut self, word: &str, message: &str) {
        self.put(b"-");
        self.put(word.as_bytes());
        if !message.is_empty() {
            self.put(b" ");
            self.put(message.as_bytes());
        }
        self.put(b"\r\n");
    }

    /// An integer, `:42\r\n`.
    fn integer(&mut self, n: i64) {
        self.put(b":");
        self.put(Int::new(n).as_bytes());
        self.put(b"\r\n");
    }

    /// The header of a bulk string of `len` bytes, `$len\r\n`: write the `len` bytes and then
    /// [`Out::bulk_end`] (for a value held in pieces).
    fn bulk_header(&mut self, len: usize) {
        self.put(b"$");
        self.put(Int::new(len as i64).as_bytes());
        self.put(b"\r\n");
    }

    /// The CRLF that ends a bulk string begun with [`Out::bulk_header`].
    fn bulk_end(&mut self) {
        self.put(b"\r\n");
    }

    /// A bulk string.
    fn bulk(&mut self, b: &[u8]) {
        self.bulk_header(b.len());
        self.put(b);
        self.bulk_end();
    }

    /// The null bulk string, `$-1\r\n` (a missing value).
    fn null_bulk(&mut self) {
        self.put(b"$-1\r\n");
    }

    /// The header of an array of `n` elements, `*n\r\n`; the elements follow.
    fn array(&mut self, n: usize) {
        self.put(b"*");
        self.put(Int::new(n as i64).as_bytes());
        self.put(b"\r\n");
    }

    /// The null array, `*-1\r\n` (a missing list).
    fn null_array(&mut self) {
        self.put(b"*-1\r\n");
    }

    /// A command: an array of bulk strings, as a client sends it.
    fn command(&mut self, args: &[&[u8]]) {
        self.array(args.len());
        for a in args {
            self.bulk(a);
        }
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// An [`Out`] that only counts the bytes written: the length of a reply before its buffer
/// exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Len(pub usize);

impl Out for Len {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// An [`Out`] over a caller's fixed buffer. Bytes past its end are not written; the writer
/// remembers that it overflowed ([`SliceOut::finish`]).
#[derive(Debug)]
pub struct SliceOut<'b> {
    buf: &'b mut [u8],
    at: usize,
    overflow: bool,
}

/// A [`SliceOut`] ran past the end of its buffer: `needed` bytes were written to a buffer of
/// `capacity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// Bytes written in all.
    pub needed: usize,
    /// The buffer's length.
    pub capacity: usize,
}

impl std::fmt::Display for Overflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RESP of {} bytes does not fit a buffer of {}",
            self.needed, self.capacity
        )
    }
}

impl std::error::Error for Overflow {}

impl<'b> SliceOut<'b> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'b mut [u8]) -> SliceOut<'b> {
        SliceOut {
            buf,
            at: 0,
            overflow: false,
        }
    }

    /// Bytes written (or, after an overflow, that would have been).
    pub fn written(&self) -> usize {
        self.at
    }

    /// The length written, or the overflow.
    pub fn finish(self) -> Result<usize, Overflow> {
        if self.overflow {
            Err(Overflow {
                needed: self.at,
                capacity: self.buf.len(),
            })
        } else {
            Ok(self.at)
        }
    }
}

impl Out for SliceOut<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let end = self.at + bytes.len();
        match self.buf.get_mut(self.at..end) {
            Some(dst) => dst.copy_from_slice(bytes),
            None => self.overflow = true,
        }
        self.at = end;
    }
}

/// A decimal integer formatted on the stack (no allocation).
#[derive(Clone, Copy, Debug)]
pub struct Int {
    digits: [u8; 20],
    start: u8,
}

impl Int {
    /// `n` in decimal.
    pub fn new(n: i64) -> Int {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut v = n.unsigned_abs();
        loop {
            at -= 1;
            digits[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        if n < 0 {
            at -= 1;
            digits[at] = b'-';
        }
        Int {
            digits,
            start: at as u8,
        }
    }

    /// The digits (and sign).
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start as usize..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_writes_as_redis_does() {
        let mut v = Vec::new();
        v.simple(b"OK");
        v.error("TOOLARGE", "value too large");
        v.integer(-42);
        v.bulk(b"a\r\nb");
        v.null_bulk();
        v.array(2);
        v.bulk_header(3);
        v.put(b"x");
        v.put(b"yz");
        v.bulk_end();
        v.null_array();
        v.error("X", "");
        assert_eq!(
            v,
            b"+OK\r\n-TOOLARGE value too large\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n$3\r\nxyz\r\n*-1\r\n-X\r\n"
        );
        let mut c = Vec::new();
        c.command(&[b"SET", b"k", b""]);
        assert_eq!(c, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn len_counts_what_a_slice_receives() {
        let write = |o: &mut dyn Out| {
            o.array(3);
            o.bulk(&[7; 300]);
            o.null_bulk();
            o.integer(i64::MIN);
        };
        let mut n = Len::default();
        write(&mut n);
        let mut buf = vec![0u8; n.0];
        let mut s = SliceOut::new(&mut buf);
        write(&mut s);
        assert_eq!(s.finish(), Ok(n.0));
        let mut v = Vec::new();
        write(&mut v);
        assert_eq!(v, buf);
        // One byte short: reported, nothing written out of bounds.
        let mut short = vec![0u8; n.0 - 1];
        let mut s = SliceOut::new(&mut short);
        write(&mut s);
        assert_eq!(
            s.finish(),
            Err(Overflow {
                needed: n.0,
                capacity: n.0 - 1
            })
        );
    }

    #[test]
    fn integers_format_without_allocating() {
        for n in [0, 7, -7, 10, 1234567890, i64::MAX, i64::MIN] {
            assert_eq!(Int::new(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}
