//! The server side: a request (an array of bulk strings, as every Redis client sends) parsed
//! into arguments borrowed from the received bytes.

use std::fmt;
use std::ops::Range;

/// Most arguments a request may have.
pub const MAX_ARGS: usize = 1 << 16;

/// Bytes of the smallest argument (`$0\r\n\r\n`): a request of `len` bytes cannot hold more
/// than `len / 6` arguments, so no more room is reserved than the bytes present can back.
pub const MIN_ARG_LEN: usize = 6;

/// What was wrong with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// The request ended inside a line or a bulk string.
    Truncated,
    /// A line did not start with the type byte expected there (`*` for the request, `$` for
    /// an argument).
    Expected {
        /// The type byte expected.
        want: u8,
        /// The byte found (`None`: an empty line).
        found: Option<u8>,
    },
    /// A length line was not a decimal number.
    BadNumber,
    /// The request's argument count was not in `1..=MAX_ARGS`.
    ArgCount(i64),
    /// The request claimed more arguments than its bytes can hold.
    TooManyArgs {
        /// The count claimed.
        claimed: i64,
        /// The most the bytes can hold (one per [`MIN_ARG_LEN`] bytes).
        room: usize,
    },
    /// An argument was the null bulk string (`$-1`), or had another negative length.
    NegativeLength(i64),
    /// A bulk string was not followed by CRLF.
    NoCrlfAfterBulk,
    /// Bytes followed the request.
    Trailing(usize),
}

/// A request that is not RESP, and where: the byte offset of the element that was wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Offset into the request where the bad element starts.
    pub offset: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.offset;
        match self.kind {
            ParseErrorKind::Truncated => write!(f, "request ends inside the element at byte {at}"),
            ParseErrorKind::Expected { want, found } => write!(
                f,
                "expected '{}' at byte {at}, found {:?}",
                want as char,
                found.map(char::from)
            ),
            ParseErrorKind::BadNumber => write!(f, "bad length at byte {at}"),
            ParseErrorKind::ArgCount(n) => {
                write!(f, "request with {n} arguments (1..={MAX_ARGS} allowed)")
            }
            ParseErrorKind::TooManyArgs { claimed, room } => write!(
                f,
                "request claims {claimed} arguments but its bytes hold at most {room}"
            ),
            ParseErrorKind::NegativeLength(-1) => {
                write!(f, "null bulk string at byte {at} in a request")
            }
            ParseErrorKind::NegativeLength(n) => {
                write!(f, "negative bulk length {n} at byte {at}")
            }
            ParseErrorKind::NoCrlfAfterBulk => {
                write!(f, "no CRLF after the bulk string ending at byte {at}")
            }
            ParseErrorKind::Trailing(n) => write!(f, "{n} trailing bytes after byte {at}"),
        }
    }
}

impl std::error::Error for ParseError {}

fn fail<T>(offset: usize, kind: ParseErrorKind) -> Result<T, ParseError> {
    Err(ParseError { offset, kind })
}

/// The line starting at `*at` (without its CRLF); advances past the CRLF.
pub(crate) fn line<'a>(buf: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let rest = buf.get(*at..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    *at += end + 2;
    Some(&rest[..end])
}

/// A decimal integer, optionally signed, as Redis writes lengths.
pub(crate) fn int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', d @ ..] => (true, d),
        [b'+', d @ ..] => (false, d),
        d => (false, d),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// The number on the `prefix` line at `*at`.
fn header(buf: &[u8], at: &mut usize, prefix: u8) -> Result<i64, ParseError> {
    let start = *at;
    let Some(l) = line(buf, at) else {
        return fail(start, ParseErrorKind::Truncated);
    };
    if l.first() != Some(&prefix) {
        return fail(
            start,
            ParseErrorKind::Expected {
                want: prefix,
                found: l.first().copied(),
            },
        );
    }
    int(&l[1..]).map_or(fail(start, ParseErrorKind::BadNumber), Ok)
}

/// A request parser that keeps its argument list from one request to the next: once it has
/// seen the largest request of a run, parsing allocates nothing.
#[derive(Debug, Default)]
pub struct Parser {
    /// Where each argument of the last request lies in its bytes.
    spans: Vec<Range<usize>>,
}

impl Parser {
    /// A parser with an empty argument list.
    pub fn new() -> Parser {
        Parser::default()
    }

    /// Parses `buf`, which must hold exactly one request (an array of 1 to [`MAX_ARGS`] bulk
    /// strings, none null). The argument list grows only when `buf` has more arguments than
    /// any request before, and never beyond one per [`MIN_ARG_LEN`] bytes of `buf`, whatever
    /// count the request claims.
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> Result<Args<'a, '_>, ParseError> {
        self.spans.clear();
        let mut at = 0;
        let n = header(buf, &mut at, b'*')?;
        if !(1..=MAX_ARGS as i64).contains(&n) {
            return fail(0, ParseErrorKind::ArgCount(n));
        }
        // The count is the sender's claim: reserve only what the bytes present can back.
        let room = (buf.len() - at) / MIN_ARG_LEN;
        if n as usize > room {
            return fail(0, ParseErrorKind::TooManyArgs { claimed: n, room });
        }
        // Exactly: the room held stays within one argument per MIN_ARG_LEN bytes of the
        // longest request seen.
        self.spans.reserve_exact(n as usize);
        for _ in 0..n {
            let start = at;
            let len = header(buf, &mut at, b'$')?;
            if len < 0 {
                return fail(start, ParseErrorKind::NegativeLength(len));
            }
            let end = match at.checked_add(len as usize) {
                Some(e) if e.checked_add(2).is_some_and(|e2| e2 <= buf.len()) => e,
                _ => return fail(start, ParseErrorKind::Truncated),
            };
            if &buf[end..end + 2] != b"\r\n" {
                return fail(end, ParseErrorKind::NoCrlfAfterBulk);
            }
            self.spans.push(at..end);
            at = end + 2;
        }
        if at != buf.len() {
            return fail(at, ParseErrorKind::Trailing(buf.len() - at));
        }
        Ok(Args {
            buf,
            spans: &self.spans,
        })
    }

    /// Room for arguments the parser holds (for tests of its bound).
    pub fn capacity(&self) -> usize {
        self.spans.capacity()
    }
}

/// The arguments of a parsed request, borrowed from its bytes (`'a`) through the parser's
/// list (`'p`). There is at least one: the command name.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a, 'p> {
    buf: &'a [u8],
    spans: &'p [Range<usize>],
}

impl<'a> Args<'a, '_> {
    /// How many arguments, the command name included.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Never: a request has at least its command name.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i` (0 is the command name), if there is one.
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        self.spans.get(i).map(|r| &self.buf[r.clone()])
    }

    /// Argument `i`; panics when `i >= self.len()` (as slice indexing does).
    pub fn arg(&self, i: usize) -> &'a [u8] {
        &self.buf[self.spans[i].clone()]
    }

    /// The command name (argument 0).
    pub fn command(&self) -> &'a [u8] {
        self.arg(0)
    }

    /// Whether the command name is `name`, ignoring ASCII case (as Redis does).
    pub fn is(&self, name: &str) -> bool {
        self.command().eq_ignore_ascii_case(name.as_bytes())
    }

    /// The arguments in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + '_ {
        let buf = self.buf;
        self.spans.iter().map(move |r| &buf[r.clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> Result<Vec<Vec<u8>>, ParseError> {
        let mut p = Parser::new();
        p.parse(buf).map(|a| a.iter().map(<[u8]>::to_vec).collect())
    }

    #[test]
    fn parses_arguments_in_place() {
        let req = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n";
        let mut p = Parser::new();
        let a = p.parse(req).unwrap();
        assert_eq!(a.len(), 3);
        assert!(a.is("set"));
        assert_eq!(a.arg(2), b"a\r\nb");
        assert_eq!(a.get(3), None);
        // Borrowed from the request, not copied.
        assert_eq!(a.arg(1).as_ptr(), req[17..].as_ptr());
    }

    #[test]
    fn malformed_requests_are_errors_that_say_where() {
        for (bad, kind) in [
            (&b""[..], ParseErrorKind::Truncated),
            (b"*", ParseErrorKind::Truncated),
            (
                b"*1\r\n",
                ParseErrorKind::TooManyArgs {
                    claimed: 1,
                    room: 0,
                },
            ),
            (b"*1\r\n$5\r\nab\r\n", ParseErrorKind::Truncated),
            (b"*1\r\n$-1\r\n\r\n", ParseErrorKind::NegativeLength(-1)),
            (b"*0\r\n", ParseErrorKind::ArgCount(0)),
            (
                b"*99999999999\r\n",
                ParseErrorKind::ArgCount(99_999_999_999),
            ),
            (b"*1\r\n$2\r\nab\r\nextra", ParseErrorKind::Trailing(5)),
            (
                b"*1\r\n$18446744073709551615\r\n",
                ParseErrorKind::BadNumber,
            ),
            (b"*1\r\n$2\r\nabcd\r\n", ParseErrorKind::NoCrlfAfterBulk),
            (b"*1x\r\n", ParseErrorKind::BadNumber),
            (
                b"+OK\r\n",
                ParseErrorKind::Expected {
                    want: b'*',
                    found: Some(b'+'),
                },
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.kind, kind, "{:?}: {e}", String::from_utf8_lossy(bad));
        }
        let e = parse(b"*1\r\n$2\r\nabcd\r\n").unwrap_err();
        assert_eq!(e.offset, 10);
        assert!(e.to_string().contains("byte 10"), "{e}");
    }

    #[test]
    fn an_argument_count_reserves_only_what_the_bytes_can_back() {
        // 8 bytes claiming 65 536 arguments: refused before anything is reserved.
        let mut p = Parser::new();
        let e = p.parse(b"*65536\r\n").unwrap_err();
        assert!(e.to_string().contains("claims 65536 arguments"), "{e}");
        assert_eq!(p.capacity(), 0);
        // As many empty arguments as the bytes hold still parse.
        let mut req = b"*1000\r\n".to_vec();
        for _ in 0..1000 {
            req.extend_from_slice(b"$0\r\n\r\n");
        }
        assert_eq!(p.parse(&req).unwrap().len(), 1000);
        assert!(p.capacity() * MIN_ARG_LEN <= req.len() + MIN_ARG_LEN * 4);
    }

    #[test]
    fn the_argument_list_is_reused() {
        let mut p = Parser::new();
        p.parse(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
            .unwrap();
        let cap = p.capacity();
        let ptr = p.spans.as_ptr();
        for _ in 0..10 {
            assert_eq!(p.parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap().len(), 2);
        }
        assert_eq!((p.capacity(), p.spans.as_ptr()), (cap, ptr));
    }

    #[test]
    fn numbers_parse_as_redis_writes_them() {
        assert_eq!(int(b"0"), Some(0));
        assert_eq!(int(b"-1"), Some(-1));
        assert_eq!(int(b"+7"), Some(7));
        assert_eq!(int(b"9223372036854775807"), Some(i64::MAX));
        for bad in [&b""[..], b"-", b"1 ", b"9223372036854775808", b"0x1"] {
            assert_eq!(int(bad), None, "{bad:?}");
        }
    }
}
