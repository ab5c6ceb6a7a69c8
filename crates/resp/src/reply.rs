//! The client side: replies read back, one element at a time borrowed from the received bytes
//! ([`Reader`]), or whole as an owned [`Value`] ([`parse`]). Input that can never be RESP is
//! an error saying where; input that is only the beginning of a reply is "incomplete"
//! (`Ok(None)`), so a stream reader waits for more bytes.

use std::fmt;

use crate::request::int;

/// Largest bulk string accepted in a reply (Redis's own `proto-max-bulk-len` default).
pub const MAX_BULK: usize = 512 << 20;
/// Most elements accepted in one reply array.
pub const MAX_ARRAY: usize = 1 << 20;
/// Deepest nesting of arrays [`parse`] accepts.
pub const MAX_DEPTH: usize = 8;
/// Longest simple-string, error or integer line accepted (without CRLF).
pub const MAX_LINE: usize = 64 << 10;

/// What was wrong with a reply, and at which byte offset of the parsed buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    /// Offset into the buffer where the bad element starts.
    pub offset: usize,
    /// What was wrong.
    pub what: String,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed RESP reply at byte {}: {}",
            self.offset, self.what
        )
    }
}

impl std::error::Error for ProtocolError {}

fn err<T>(offset: usize, what: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError {
        offset,
        what: what.into(),
    })
}

/// One element of a reply, borrowed from its bytes. An array is only its header: its
/// elements are the frames that follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `+OK`
    Simple(&'a [u8]),
    /// `-ERR ...`
    Error(&'a [u8]),
    /// `:42`
    Integer(i64),
    /// `$5\r\nhello` (`None`: the null bulk string `$-1`).
    Bulk(Option<&'a [u8]>),
    /// `*2\r\n` (`None`: the null array `*-1`): the number of elements that follow.
    Array(Option<usize>),
}

/// Reads the elements of one or more replies from a buffer, in order, without copying.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, at: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Whether every byte has been read.
    pub fn is_done(&self) -> bool {
        self.at == self.buf.len()
    }

    /// An error unless every byte has been read.
    pub fn finish(&self) -> Result<(), ProtocolError> {
        if self.is_done() {
            Ok(())
        } else {
            err(
                self.at,
                format!("{} trailing bytes", self.buf.len() - self.at),
            )
        }
    }

    /// The line after the type byte at `start` (without CRLF), and where the next element
    /// begins; `None` when the line is not complete yet.
    fn line(&self, start: usize) -> Result<Option<(&'a [u8], usize)>, ProtocolError> {
        let rest = &self.buf[start + 1..];
        let limit = rest.len().min(MAX_LINE + 2);
        match rest[..limit].iter().position(|&b| b == b'\n') {
            Some(i) => {
                if i == 0 || rest[i - 1] != b'\r' {
                    return err(start + 1 + i, "line ends in LF without CR");
                }
                Ok(Some((&rest[..i - 1], start + 1 + i + 1)))
            }
            None if rest.len() > MAX_LINE + 1 => {
                err(start, format!("line longer than {MAX_LINE} bytes"))
            }
            None => Ok(None),
        }
    }

    /// The next element: `Ok(None)` (and nothing consumed) when the buffer ends before it does.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'a>>, ProtocolError> {
        let start = self.at;
        let Some(&kind) = self.buf.get(start) else {
            return Ok(None);
        };
        let Some((l, next)) = self.line(start)? else {
            return Ok(None);
        };
        let number = || {
            int(l).map_or_else(
                || {
                    err(
                        start + 1,
                        format!("not an integer: {:?}", String::from_utf8_lossy(l)),
                    )
                },
                Ok,
            )
        };
        let frame = match kind {
            b'+' => Frame::Simple(l),
            b'-' => Frame::Error(l),
            b':' => Frame::Integer(number()?),
            b'$' => match number()? {
                -1 => Frame::Bulk(None),
                n if n < 0 || n as u64 > MAX_BULK as u64 => {
                    return err(
                        start,
                        format!("bulk length {n} out of range (-1..={MAX_BULK})"),
                    )
                }
                n => {
                    let n = n as usize;
                    if self.buf.len() < next + n + 2 {
                        return Ok(None);
                    }
                    if &self.buf[next + n..next + n + 2] != b"\r\n" {
                        return err(
                            next + n,
                            format!("bulk string of {n} bytes not followed by CRLF"),
                        );
                    }
                    self.at = next + n + 2;
                    return Ok(Some(Frame::Bulk(Some(&self.buf[next..next + n]))));
                }
            },
            b'*' => match number()? {
                -1 => Frame::Array(None),
                n if n < 0 || n as u64 > MAX_ARRAY as u64 => {
                    return err(
                        start,
                        format!("array length {n} out of range (-1..={MAX_ARRAY})"),
                    )
                }
                n => Frame::Array(Some(n as usize)),
            },
            other => return err(start, format!("unknown reply type byte 0x{other:02x}")),
        };
        self.at = next;
        Ok(Some(frame))
    }

    /// The next element, which must be complete: a reply that ends early is an error here
    /// (for a reply received whole, as one datagram).
    pub fn frame(&mut self) -> Result<Frame<'a>, ProtocolError> {
        let at = self.at;
        self.next_frame()?
            .map_or_else(|| err(at, "reply ends inside an element"), Ok)
    }

    /// The next whole reply as an owned [`Value`]: `Ok(None)` (nothing consumed) when the
    /// buffer ends before it does.
    pub fn next_value(&mut self) -> Result<Option<Value>, ProtocolError> {
        let start = self.at;
        let v = self.value_at(0);
        if !matches!(v, Ok(Some(_))) {
            self.at = start;
        }
        v
    }

    fn value_at(&mut self, depth: usize) -> Result<Option<Value>, ProtocolError> {
        let start = self.at;
        let Some(f) = self.next_frame()? else {
            return Ok(None);
        };
        Ok(Some(match f {
            Frame::Simple(s) => Value::Simple(s.to_vec()),
            Frame::Error(s) => Value::Error(s.to_vec()),
            Frame::Integer(n) => Value::Integer(n),
            Frame::Bulk(b) => Value::Bulk(b.map(<[u8]>::to_vec)),
            Frame::Array(None) => Value::Array(None),
            Frame::Array(Some(n)) => {
                if depth + 1 > MAX_DEPTH {
                    return err(start, format!("arrays nested deeper than {MAX_DEPTH}"));
                }
                // Reserve no more than a small bound: the count is the sender's claim.
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    match self.value_at(depth + 1)? {
                        Some(v) => items.push(v),
                        None => return Ok(None),
                    }
                }
                Value::Array(Some(items))
            }
        }))
    }
}

/// One reply, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`
    Simple(Vec<u8>),
    /// `-ERR ...`
    Error(Vec<u8>),
    /// `:42`
    Integer(i64),
    /// `$5\r\nhello` (`None`: the null bulk string `$-1`).
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...` (`None`: the null array `*-1`).
    Array(Option<Vec<Value>>),
}

/// Parses one reply from the start of `buf`: `Ok(Some((value, bytes consumed)))`, `Ok(None)`
/// when `buf` holds only the beginning of a reply, or an error when it can never be one.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    let mut r = Reader::new(buf);
    Ok(r.next_value()?.map(|v| (v, r.position())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_type_and_waits_for_more() {
        let all: &[u8] =
            b"+OK\r\n-ERR no\r\n:-42\r\n$5\r\nh\r\nlo\r\n$-1\r\n*2\r\n$1\r\na\r\n*-1\r\n*0\r\n";
        let want = [
            Value::Simple(b"OK".to_vec()),
            Value::Error(b"ERR no".to_vec()),
            Value::Integer(-42),
            Value::Bulk(Some(b"h\r\nlo".to_vec())),
            Value::Bulk(None),
            Value::Array(Some(vec![
                Value::Bulk(Some(b"a".to_vec())),
                Value::Array(None),
            ])),
            Value::Array(Some(vec![])),
        ];
        let mut pos = 0;
        for w in &want {
            // Every strict prefix of a reply is incomplete, never an error.
            let (v, n) = parse(&all[pos..]).unwrap().unwrap();
            assert_eq!(&v, w);
            for cut in 0..n {
                assert_eq!(parse(&all[pos..pos + cut]), Ok(None), "{w:?} cut at {cut}");
            }
            pos += n;
        }
        assert_eq!(pos, all.len());
    }

    #[test]
    fn frames_borrow_the_reply() {
        let buf = b"*2\r\n$3\r\nabc\r\n$-1\r\n";
        let mut r = Reader::new(buf);
        assert_eq!(r.frame(), Ok(Frame::Array(Some(2))));
        match r.frame().unwrap() {
            Frame::Bulk(Some(b)) => assert_eq!(b.as_ptr(), buf[8..].as_ptr()),
            f => panic!("{f:?}"),
        }
        assert_eq!(r.frame(), Ok(Frame::Bulk(None)));
        assert!(r.finish().is_ok());
        assert!(r.frame().unwrap_err().what.contains("ends inside"));
        let mut r = Reader::new(b":1\r\nx");
        r.frame().unwrap();
        assert!(r.finish().unwrap_err().what.contains("1 trailing"));
    }

    #[test]
    fn malformed_replies_are_errors() {
        for (bad, why) in [
            (&b"?x\r\n"[..], "unknown reply type"),
            (b":12a\r\n", "not an integer"),
            (b":\r\n", "not an integer"),
            (b"$-2\r\n", "out of range"),
            (b"$3\r\nabcX\r\n", "not followed by CRLF"),
            (b"$99999999999\r\n", "out of range"),
            (b"*-5\r\n", "out of range"),
            (b"+OK\n", "without CR"),
            (
                b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
                "nested deeper",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.what.contains(why),
                "{:?}: {e}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = vec![b'+'; MAX_LINE + 10];
        assert!(parse(&long).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        // A fixed xorshift stream: the same inputs every run.
        let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let alphabet = b"+-:$*\r\n0123456789-abc";
        for _ in 0..20_000 {
            let n = (next() % 40) as usize;
            let buf: Vec<u8> = (0..n)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let _ = parse(&buf);
            let mut p = crate::Parser::new();
            let _ = p.parse(&buf);
        }
    }
}
