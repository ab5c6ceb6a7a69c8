//! RESP (Redis serialization protocol, version 2): command encoding and an incremental reply
//! parser that rejects malformed input with an error, never a panic.

use std::fmt;

/// Largest bulk string accepted in a reply (Redis's own `proto-max-bulk-len` default).
pub const MAX_BULK: usize = 512 << 20;
/// Most elements accepted in one reply array.
pub const MAX_ARRAY: usize = 1 << 20;
/// Deepest nesting of arrays accepted.
pub const MAX_DEPTH: usize = 8;
/// Longest simple-string, error or integer line accepted (without CRLF).
pub const MAX_LINE: usize = 64 << 10;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`
    Simple(Vec<u8>),
    /// `-ERR ...`
    Error(Vec<u8>),
    /// `:42`
    Integer(i64),
    /// `$5\r\nhello` (`None`: the nil bulk string `$-1`).
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...` (`None`: the nil array `*-1`).
    Array(Option<Vec<Value>>),
}

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

/// Appends a command (an array of bulk strings) to `out`.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses one reply from the start of `buf`: `Ok(Some((value, bytes consumed)))`, `Ok(None)`
/// when `buf` holds only the beginning of a reply, or an error when it can never be one.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(v) => Ok(Some((v, pos))),
        None => Ok(None),
    }
}

fn err<T>(offset: usize, what: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError {
        offset,
        what: what.into(),
    })
}

/// The line starting at `*pos` (without CRLF); advances past the CRLF.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, ProtocolError> {
    let start = *pos;
    let rest = &buf[start..];
    let limit = rest.len().min(MAX_LINE + 2);
    match rest[..limit].iter().position(|&b| b == b'\n') {
        Some(i) => {
            if i == 0 || rest[i - 1] != b'\r' {
                return err(start + i, "line ends in LF without CR");
            }
            *pos = start + i + 1;
            Ok(Some(&rest[..i - 1]))
        }
        None if rest.len() > MAX_LINE + 1 => {
            err(start, format!("line longer than {MAX_LINE} bytes"))
        }
        None => Ok(None),
    }
}

fn int(s: &[u8], offset: usize) -> Result<i64, ProtocolError> {
    let t = std::str::from_utf8(s).ok().filter(|t| !t.is_empty());
    match t.and_then(|t| t.parse::<i64>().ok()) {
        Some(v) => Ok(v),
        None => err(
            offset,
            format!("not an integer: {:?}", String::from_utf8_lossy(s)),
        ),
    }
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<Value>, ProtocolError> {
    let start = *pos;
    let Some(&kind) = buf.get(start) else {
        return Ok(None);
    };
    *pos += 1;
    let Some(l) = line(buf, pos)? else {
        return Ok(None);
    };
    match kind {
        b'+' => Ok(Some(Value::Simple(l.to_vec()))),
        b'-' => Ok(Some(Value::Error(l.to_vec()))),
        b':' => Ok(Some(Value::Integer(int(l, start + 1)?))),
        b'$' => {
            let n = int(l, start + 1)?;
            if n == -1 {
                return Ok(Some(Value::Bulk(None)));
            }
            if n < 0 || n as u64 > MAX_BULK as u64 {
                return err(
                    start,
                    format!("bulk length {n} out of range (-1..={MAX_BULK})"),
                );
            }
            let n = n as usize;
            if buf.len() < *pos + n + 2 {
                return Ok(None);
            }
            if &buf[*pos + n..*pos + n + 2] != b"\r\n" {
                return err(
                    *pos + n,
                    format!("bulk string of {n} bytes not followed by CRLF"),
                );
            }
            let v = buf[*pos..*pos + n].to_vec();
            *pos += n + 2;
            Ok(Some(Value::Bulk(Some(v))))
        }
        b'*' => {
            let n = int(l, start + 1)?;
            if n == -1 {
                return Ok(Some(Value::Array(None)));
            }
            if n < 0 || n as u64 > MAX_ARRAY as u64 {
                return err(
                    start,
                    format!("array length {n} out of range (-1..={MAX_ARRAY})"),
                );
            }
            if depth + 1 > MAX_DEPTH {
                return err(start, format!("arrays nested deeper than {MAX_DEPTH}"));
            }
            let mut items = Vec::with_capacity((n as usize).min(1024));
            for _ in 0..n {
                match parse_at(buf, pos, depth + 1)? {
                    Some(v) => items.push(v),
                    None => return Ok(None),
                }
            }
            Ok(Some(Value::Array(Some(items))))
        }
        other => err(start, format!("unknown reply type byte 0x{other:02x}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands() {
        let mut out = Vec::new();
        encode_command(&mut out, &[b"SET", b"k", b""]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

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
        let mut rng = loadgen::SeededRng::new(5);
        for _ in 0..20_000 {
            let n = (rng.next_u64() % 40) as usize;
            let alphabet = b"+-:$*\r\n0123456789-abc";
            let buf: Vec<u8> = (0..n)
                .map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize])
                .collect();
            let _ = parse(&buf);
        }
    }
}
