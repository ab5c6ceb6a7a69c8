//! The memcached text protocol: command encoding (with key checks) and an incremental reply
//! parser that rejects malformed input with an error, never a panic.

use std::fmt;

/// memcached's longest key.
pub const MAX_KEY: usize = 250;
/// Largest value accepted in a reply.
pub const MAX_VALUE: usize = 1 << 30;
/// Longest reply line accepted (without CRLF).
pub const MAX_LINE: usize = 4096;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A retrieval: the `VALUE` items before `END` as (key, data), in order (hits only).
    Values(Vec<(Vec<u8>, Vec<u8>)>),
    /// A status line: `STORED`, `NOT_STORED`, `EXISTS`, `NOT_FOUND`, `DELETED`, `OK`, ...
    Status(String),
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...`.
    Error(String),
}

/// What was wrong with a reply (byte offset into the parsed buffer), or with a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    /// Offset into the buffer where the bad element starts (0 for commands).
    pub offset: usize,
    /// What was wrong.
    pub what: String,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memcached protocol: {} (at byte {})",
            self.what, self.offset
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

/// Checks that `key` can travel in the text protocol: 1..=250 bytes, no whitespace or
/// control characters.
pub fn check_key(key: &[u8]) -> Result<(), ProtocolError> {
    if key.is_empty() || key.len() > MAX_KEY {
        return err(
            0,
            format!(
                "key of {} bytes (memcached keys are 1..={MAX_KEY})",
                key.len()
            ),
        );
    }
    if let Some(b) = key.iter().find(|&&b| b <= b' ' || b == 0x7f) {
        return err(
            0,
            format!(
                "key {:?} holds byte 0x{b:02x}",
                String::from_utf8_lossy(key)
            ),
        );
    }
    Ok(())
}

/// Appends `get k1 k2 ...`.
pub fn encode_get(out: &mut Vec<u8>, keys: &[&[u8]]) -> Result<(), ProtocolError> {
    if keys.is_empty() {
        return err(0, "get needs at least one key");
    }
    out.extend_from_slice(b"get");
    for k in keys {
        check_key(k)?;
        out.push(b' ');
        out.extend_from_slice(k);
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends a storage command (`set`, `add`, `append`, ...) with flags 0 and no expiry.
pub fn encode_store(
    out: &mut Vec<u8>,
    cmd: &str,
    key: &[u8],
    data: &[u8],
) -> Result<(), ProtocolError> {
    check_key(key)?;
    out.extend_from_slice(cmd.as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    out.extend_from_slice(format!(" 0 0 {}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends `delete key`.
pub fn encode_delete(out: &mut Vec<u8>, key: &[u8]) -> Result<(), ProtocolError> {
    check_key(key)?;
    out.extend_from_slice(b"delete ");
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

fn line(buf: &[u8], start: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = &buf[start..];
    let limit = rest.len().min(MAX_LINE + 2);
    match rest[..limit].iter().position(|&b| b == b'\n') {
        Some(i) if i == 0 || rest[i - 1] != b'\r' => err(start + i, "line ends in LF without CR"),
        Some(i) => Ok(Some((&rest[..i - 1], start + i + 1))),
        None if rest.len() > MAX_LINE + 1 => {
            err(start, format!("line longer than {MAX_LINE} bytes"))
        }
        None => Ok(None),
    }
}

/// Parses one reply from the start of `buf`: `Ok(Some((reply, bytes consumed)))`, `Ok(None)`
/// when only its beginning has arrived, or an error when it can never be a reply.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let mut pos = 0;
    let mut items = Vec::new();
    loop {
        let Some((l, next)) = line(buf, pos)? else {
            return Ok(None);
        };
        let text = std::str::from_utf8(l).map_err(|_| ProtocolError {
            offset: pos,
            what: "reply line is not UTF-8".into(),
        })?;
        if text == "END" {
            return Ok(Some((Reply::Values(items), next)));
        }
        if let Some(rest) = text.strip_prefix("VALUE ") {
            let f: Vec<&str> = rest.split(' ').collect();
            if !(f.len() == 3 || f.len() == 4) || f[0].is_empty() {
                return err(pos, format!("bad VALUE line {text:?}"));
            }
            if f[1].parse::<u32>().is_err() || (f.len() == 4 && f[3].parse::<u64>().is_err()) {
                return err(pos, format!("bad flags or cas in {text:?}"));
            }
            let n: usize = match f[2].parse::<usize>() {
                Ok(n) if n <= MAX_VALUE => n,
                _ => return err(pos, format!("bad value length in {text:?}")),
            };
            if buf.len() < next + n + 2 {
                return Ok(None);
            }
            if &buf[next + n..next + n + 2] != b"\r\n" {
                return err(next + n, format!("value of {n} bytes not followed by CRLF"));
            }
            items.push((f[0].as_bytes().to_vec(), buf[next..next + n].to_vec()));
            pos = next + n + 2;
            continue;
        }
        if !items.is_empty() {
            return err(
                pos,
                format!("{text:?} inside a retrieval reply (expected VALUE or END)"),
            );
        }
        if text == "ERROR" || text.starts_with("CLIENT_ERROR") || text.starts_with("SERVER_ERROR") {
            return Ok(Some((Reply::Error(text.to_owned()), next)));
        }
        if text.is_empty()
            || !text.bytes().all(|b| {
                b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit() || b == b' ' || b == b'.'
            })
        {
            return err(pos, format!("unexpected reply line {text:?}"));
        }
        return Ok(Some((Reply::Status(text.to_owned()), next)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_commands_and_checks_keys() {
        let mut out = Vec::new();
        encode_get(&mut out, &[b"a", b"bb"]).unwrap();
        encode_store(&mut out, "set", b"k", b"x\r\ny").unwrap();
        encode_delete(&mut out, b"k").unwrap();
        assert_eq!(out, b"get a bb\r\nset k 0 0 4\r\nx\r\ny\r\ndelete k\r\n");
        assert!(encode_get(&mut out, &[b"a b"]).is_err());
        assert!(encode_get(&mut out, &[]).is_err());
        assert!(check_key(&[b'k'; 251]).is_err());
        assert!(check_key(b"").is_err());
        assert!(check_key(b"tab\there").is_err());
        assert!(check_key(&[b'k'; 250]).is_ok());
    }

    #[test]
    fn parses_replies_and_waits_for_more() {
        let all: &[u8] = b"VALUE a 0 3\r\nx\ry\r\nVALUE bb 5 0 77\r\n\r\nEND\r\nEND\r\nSTORED\r\nNOT_FOUND\r\nSERVER_ERROR out of memory\r\n";
        let want = [
            Reply::Values(vec![
                (b"a".to_vec(), b"x\ry".to_vec()),
                (b"bb".to_vec(), vec![]),
            ]),
            Reply::Values(vec![]),
            Reply::Status("STORED".into()),
            Reply::Status("NOT_FOUND".into()),
            Reply::Error("SERVER_ERROR out of memory".into()),
        ];
        let mut pos = 0;
        for w in &want {
            let (r, n) = parse(&all[pos..]).unwrap().unwrap();
            assert_eq!(&r, w);
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
            (&b"VALUE a 0\r\n"[..], "bad VALUE line"),
            (b"VALUE a x 3\r\nabc\r\nEND\r\n", "bad flags"),
            (b"VALUE a 0 -3\r\n", "bad value length"),
            (b"VALUE a 0 3\r\nabcd\r\n", "not followed by CRLF"),
            (b"VALUE a 0 1\r\nx\r\nSTORED\r\n", "inside a retrieval"),
            (b"stored\r\n", "unexpected reply line"),
            (b"\r\n", "unexpected reply line"),
            (b"END\n", "without CR"),
            (b"\xff\xfe\r\n", "not UTF-8"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.what.contains(why),
                "{:?}: {e}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(parse(&vec![b'A'; MAX_LINE + 10]).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = loadgen::SeededRng::new(6);
        let words: [&[u8]; 8] = [
            b"VALUE ", b"a ", b"0 ", b"3", b"\r\n", b"END", b"xyz", b"STORED",
        ];
        for _ in 0..20_000 {
            let mut buf = Vec::new();
            for _ in 0..(rng.next_u64() % 12) {
                buf.extend_from_slice(words[(rng.next_u64() % 8) as usize]);
            }
            let _ = parse(&buf);
        }
    }
}
