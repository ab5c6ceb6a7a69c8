//! Redis's wire format (RESP2) as a serialization of the store: the application-specific
//! baseline of the paper's §6.2.2.
//!
//! Requests are arrays of bulk strings, with Redis's command names:
//!
//! | operation | request | reply |
//! |---|---|---|
//! | get | `GET key` | bulk string, or null bulk (`$-1`) when the key is missing |
//! | put | `SET key val` | `+OK` |
//! | getm | `MGET k1 k2 …` | array of bulk strings / null bulks |
//! | putm | `MSET k1 v1 k2 v2 …` | `+OK` |
//! | getlist | `LRANGE key 0 -1` | array, or null array (`*-1`) when the key is missing |
//! | get_from_list | `LINDEX key i` | bulk string, null bulk when missing, `-BADINDEX …` past the end |
//! | append | `RPUSH key val` | integer: the list's new length |
//! | delete | `DEL key` | integer: 1 when the key existed, 0 otherwise |
//!
//! Other failures are errors whose first word names the status (`-TOOLARGE …`,
//! `-STOREFULL …`, `-BADREQUEST …`). As in Redis, the reply is written (copied) into one
//! output buffer, here one pinned transmit buffer handed to the NIC as a single entry.

use std::io::Write as _;

use cornflakes::{ConnId, Datapath, Msg, SendError};

use crate::cf::ServeError;
use crate::ops::{Op, OpKind, Reply, Status};
use crate::rifl::Origin;
use crate::store::{Store, Value};
use crate::validate;

/// Most arguments a request may have.
pub const MAX_ARGS: usize = 1 << 16;

fn err_word(s: Status) -> &'static str {
    match s {
        Status::Ok => "OK",
        Status::NotFound => "NOTFOUND",
        Status::BadIndex => "BADINDEX",
        Status::TooLarge => "TOOLARGE",
        Status::StoreFull => "STOREFULL",
        Status::BadRequest => "BADREQUEST",
    }
}

fn word_status(w: &str) -> Option<Status> {
    [
        Status::NotFound,
        Status::BadIndex,
        Status::TooLarge,
        Status::StoreFull,
        Status::BadRequest,
    ]
    .into_iter()
    .find(|s| err_word(*s) == w)
}

/// A cursor over RESP bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn line(&mut self) -> Result<&'a [u8], String> {
        let rest = &self.buf[self.at..];
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| format!("no CRLF after byte {}", self.at))?;
        self.at += end + 2;
        Ok(&rest[..end])
    }

    fn int(&mut self, prefix: u8) -> Result<i64, String> {
        let at = self.at;
        let l = self.line()?;
        if l.first() != Some(&prefix) {
            return Err(format!(
                "expected '{}' at byte {at}, found {:?}",
                prefix as char,
                l.first().map(|c| *c as char)
            ));
        }
        std::str::from_utf8(&l[1..])
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| format!("bad length at byte {at}"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| e + 2 <= self.buf.len())
            .ok_or_else(|| {
                format!(
                    "bulk string of {n} bytes at byte {} runs past the end",
                    self.at
                )
            })?;
        if &self.buf[end..end + 2] != b"\r\n" {
            return Err(format!("no CRLF after bulk string ending at byte {end}"));
        }
        let s = &self.buf[self.at..end];
        self.at = end + 2;
        Ok(s)
    }

    /// A bulk string, or `None` for the null bulk.
    fn bulk(&mut self) -> Result<Option<&'a [u8]>, String> {
        match self.int(b'$')? {
            -1 => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            n => Err(format!("negative bulk length {n}")),
        }
    }

    fn done(&self) -> Result<(), String> {
        if self.at == self.buf.len() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes", self.buf.len() - self.at))
        }
    }
}

/// Bytes of the smallest argument (`$0\r\n\r\n`): a request of `len` bytes cannot hold
/// more than `len / 6` arguments, so no more are reserved before they are read.
const MIN_ARG_LEN: usize = 6;

/// Parses a request: an array of bulk strings.
pub fn parse_request(buf: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut c = Cursor { buf, at: 0 };
    let n = c.int(b'*')?;
    if !(1..=MAX_ARGS as i64).contains(&n) {
        return Err(format!("request with {n} arguments"));
    }
    // The count is the sender's claim: reserve only what the bytes present can back.
    let room = (buf.len() - c.at) / MIN_ARG_LEN;
    if n as usize > room {
        return Err(format!(
            "request claims {n} arguments but its {} bytes hold at most {room}",
            buf.len()
        ));
    }
    let mut args = Vec::with_capacity(n as usize);
    for _ in 0..n {
        args.push(c.bulk()?.ok_or("null bulk string in a request")?);
    }
    c.done()?;
    Ok(args)
}

fn push_bulk(out: &mut Vec<u8>, b: &[u8]) {
    let _ = write!(out, "${}\r\n", b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends the RESP encoding of request `op`.
pub fn encode_request(op: &Op, out: &mut Vec<u8>) {
    let mut args: Vec<&[u8]> = Vec::new();
    let idx;
    match op {
        Op::Get { key } => args.extend([&b"GET"[..], key.as_bytes()]),
        Op::Put { key, val } => args.extend([&b"SET"[..], key.as_bytes(), val]),
        Op::GetM { keys } => {
            args.push(b"MGET");
            args.extend(keys.iter().map(|k| k.as_bytes()));
        }
        Op::PutM { keys, vals } => {
            args.push(b"MSET");
            for (k, v) in keys.iter().zip(vals) {
                args.extend([k.as_bytes(), v]);
            }
        }
        Op::GetList { key } => args.extend([&b"LRANGE"[..], key.as_bytes(), b"0", b"-1"]),
        Op::GetFromList { key, index } => {
            idx = index.to_string();
            args.extend([&b"LINDEX"[..], key.as_bytes(), idx.as_bytes()]);
        }
        Op::Append { key, val } => args.extend([&b"RPUSH"[..], key.as_bytes(), val]),
        Op::Delete { key } => args.extend([&b"DEL"[..], key.as_bytes()]),
    }
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        push_bulk(out, a);
    }
}

/// A reply being built: pieces of RESP appended in order.
enum Part<'s> {
    Text(Vec<u8>),
    Value(&'s Value),
}

fn header(out: &mut Vec<Part<'_>>, text: &str) {
    match out.last_mut() {
        Some(Part::Text(t)) => t.extend_from_slice(text.as_bytes()),
        _ => out.push(Part::Text(text.as_bytes().to_vec())),
    }
}

fn bulk_value<'s>(out: &mut Vec<Part<'s>>, v: &'s Value) {
    header(out, &format!("${}\r\n", v.len()));
    out.push(Part::Value(v));
    header(out, "\r\n");
}

fn error(out: &mut Vec<Part<'_>>, s: Status) {
    let what = match s {
        Status::NotFound => "no such key",
        Status::BadIndex => "index out of range",
        Status::TooLarge => "value too large",
        Status::StoreFull => "store memory limit reached",
        Status::BadRequest => "invalid request (key not UTF-8, or wrong arguments)",
        Status::Ok => "ok",
    };
    header(out, &format!("-{} {what}\r\n", err_word(s)));
}

fn parse_index(a: &[u8]) -> Option<usize> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Applies one RESP request to `store` and builds its reply. A command that is unknown or
/// has the wrong arguments is a malformed request; one with a key that is not UTF-8 is
/// answered `-BADREQUEST` before anything is written. Writes run once per `tag`.
fn execute<'s>(
    store: &'s mut Store,
    args: &[&[u8]],
    origin: Origin<'_>,
    out: &mut Vec<Part<'s>>,
) -> Result<(), ServeError> {
    let cmd = args[0].to_ascii_uppercase();
    let bad =
        |why: &str| ServeError::Malformed(format!("{}: {why}", String::from_utf8_lossy(&cmd)));
    let utf8 = validate::key;
    // Every key of a known command checked before anything is read or written.
    let keys_ok = match &cmd[..] {
        b"MSET" => validate::all_keys(args[1..].iter().step_by(2).copied()),
        b"MGET" => validate::all_keys(args[1..].iter().copied()),
        b"SET" | b"RPUSH" | b"DEL" | b"GET" | b"LRANGE" | b"LINDEX" => {
            validate::all_keys(args.get(1).copied())
        }
        _ => Ok(()),
    };
    if let Err(s) = keys_ok {
        error(out, store.tally(s));
        return Ok(());
    }
    let tag = (!matches!(&cmd[..], b"GET" | b"MGET" | b"LRANGE" | b"LINDEX"))
        .then(|| origin.tag())
        .flatten();
    match (&cmd[..], args.len()) {
        (b"SET", 3) => {
            match utf8(args[1]).and_then(|k| store.once(tag, |s| s.put(k, args[2]).map(|_| 0))) {
                Ok(_) => header(out, "+OK\r\n"),
                Err(s) => error(out, store.tally(s)),
            }
        }
        (b"MSET", n) if n >= 3 && n % 2 == 1 => {
            // Every key checked before the first write; the store applies all or nothing.
            let keys = validate::keys(args[1..].iter().step_by(2).copied());
            let vals: Vec<&[u8]> = args[2..].iter().step_by(2).copied().collect();
            let r = keys
                .and_then(|k| validate::pairs(&k, &vals).map(|p| p.to_vec()))
                .and_then(|pairs| store.once(tag, |s| s.put_many(&pairs).map(|_| 0)));
            match r {
                Ok(_) => header(out, "+OK\r\n"),
                Err(s) => error(out, store.tally(s)),
            }
        }
        (b"RPUSH", 3) => {
            match utf8(args[1]).and_then(|k| store.once(tag, |s| s.append(k, args[2]))) {
                Ok(n) => header(out, &format!(":{n}\r\n")),
                Err(s) => error(out, store.tally(s)),
            }
        }
        (b"DEL", 2) => match utf8(args[1]) {
            Ok(k) => {
                let n = u8::from(store.once(tag, |s| s.delete(k).map(|_| 0)).is_ok());
                header(out, &format!(":{n}\r\n"));
            }
            Err(s) => error(out, store.tally(s)),
        },
        (b"GET", 2) => match utf8(args[1]).and_then(|k| store.get(k)) {
            Ok(v) => bulk_value(out, v),
            Err(Status::NotFound) => header(out, "$-1\r\n"),
            Err(s) => error(out, s),
        },
        (b"MGET", n) if n >= 2 => {
            let store: &'s Store = store;
            header(out, &format!("*{}\r\n", n - 1));
            for k in &args[1..] {
                match utf8(k).and_then(|k| store.get(k)) {
                    Ok(v) => bulk_value(out, v),
                    Err(_) => header(out, "$-1\r\n"),
                }
            }
        }
        (b"LRANGE", 4) => {
            if args[2] != b"0" || args[3] != b"-1" {
                return Err(bad("only LRANGE key 0 -1 (the whole list) is supported"));
            }
            match utf8(args[1]).and_then(|k| store.get_list(k)) {
                Ok(list) => {
                    header(out, &format!("*{}\r\n", list.len()));
                    for v in list {
                        bulk_value(out, v);
                    }
                }
                Err(Status::NotFound) => header(out, "*-1\r\n"),
                Err(s) => error(out, s),
            }
        }
        (b"LINDEX", 3) => {
            let i = parse_index(args[2]).ok_or_else(|| bad("index is not a number"))?;
            match utf8(args[1]).and_then(|k| store.get_from_list(k, i)) {
                Ok(v) => bulk_value(out, v),
                Err(Status::NotFound) => header(out, "$-1\r\n"),
                Err(s) => error(out, s),
            }
        }
        _ => return Err(bad("unknown command or wrong number of arguments")),
    }
    Ok(())
}

/// Handles one RESP request: parses it, applies it to `store`, and queues the reply in one
/// pinned transmit buffer (or `-TOOLARGE` when the reply exceeds one buffer or message).
pub fn serve<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    conn: ConnId,
    msg: Msg,
    data: &[u8],
) -> Result<(), ServeError> {
    let args = parse_request(data).map_err(ServeError::Malformed)?;
    let mut parts = Vec::with_capacity(4);
    execute(store, &args, Origin::of(dp, conn, msg, data), &mut parts)?;
    let len: usize = parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.len(),
            Part::Value(v) => v.len(),
        })
        .sum();
    let mem = dp.memory();
    if len > mem.max_item_size().min(dp.max_message_len()) {
        let mut e = Vec::new();
        error(&mut e, Status::TooLarge);
        let Some(Part::Text(t)) = e.pop() else {
            unreachable!("error() writes one text part")
        };
        return Ok(dp.send_copy(conn, msg, &t)?);
    }
    let mut out = mem.alloc(len).map_err(SendError::from)?;
    let mut at = 0;
    for p in &parts {
        let pieces: &[&[u8]] = match p {
            Part::Text(t) => &[&t[..]],
            Part::Value(_) => &[],
        };
        for s in pieces {
            out[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
        if let Part::Value(v) = p {
            for b in v.pieces() {
                out[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
        }
    }
    out.set_len(at);
    Ok(dp.send_sga(conn, msg, &[out.freeze()])?)
}

fn reply_value(c: &mut Cursor<'_>) -> Result<(Status, Option<Vec<u8>>), String> {
    match c.buf.get(c.at) {
        Some(b'-') => {
            let l = c.line()?;
            let text = String::from_utf8_lossy(&l[1..]).into_owned();
            let word = text.split_whitespace().next().unwrap_or("");
            let s = word_status(word).ok_or_else(|| format!("error reply {text:?}"))?;
            Ok((s, None))
        }
        _ => match c.bulk()? {
            Some(b) => Ok((Status::Ok, Some(b.to_vec()))),
            None => Ok((Status::NotFound, None)),
        },
    }
}

/// Decodes the RESP reply to a request of `kind`.
pub fn decode_reply(kind: OpKind, payload: &[u8]) -> Result<Reply, String> {
    let mut c = Cursor {
        buf: payload,
        at: 0,
    };
    let first = *payload.first().ok_or("empty reply")?;
    let r = if first == b'-' {
        let (s, _) = reply_value(&mut c)?;
        Reply::status(s)
    } else {
        match kind {
            OpKind::Get | OpKind::GetFromList => {
                let (s, v) = reply_value(&mut c)?;
                let mut r = Reply::status(s);
                r.vals.extend(v);
                r
            }
            OpKind::Put | OpKind::PutM => {
                let l = c.line()?;
                if l != b"+OK" {
                    return Err(format!(
                        "expected +OK, got {:?}",
                        String::from_utf8_lossy(l)
                    ));
                }
                Reply::status(Status::Ok)
            }
            OpKind::Append => {
                c.int(b':')?;
                Reply::status(Status::Ok)
            }
            OpKind::Delete => match c.int(b':')? {
                1 => Reply::status(Status::Ok),
                0 => Reply::status(Status::NotFound),
                n => return Err(format!("DEL answered {n}")),
            },
            OpKind::GetList | OpKind::GetM => {
                let n = c.int(b'*')?;
                if n == -1 {
                    Reply::status(Status::NotFound)
                } else {
                    let mut r = Reply::status(Status::Ok);
                    for _ in 0..n.max(0) {
                        let (s, v) = reply_value(&mut c)?;
                        if r.status == Status::Ok {
                            r.status = s;
                        }
                        r.vals.push(v.unwrap_or_default());
                        if kind == OpKind::GetM {
                            r.statuses.push(s);
                        }
                    }
                    r
                }
            }
        }
    };
    c.done()?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_through_the_parser() {
        let ops = [
            Op::Get { key: "k".into() },
            Op::Put {
                key: "k".into(),
                val: b"a\r\nb".to_vec(),
            },
            Op::GetM {
                keys: vec!["a".into(), "b".into()],
            },
            Op::PutM {
                keys: vec!["a".into()],
                vals: vec![vec![]],
            },
            Op::GetList { key: "l".into() },
            Op::GetFromList {
                key: "l".into(),
                index: 12,
            },
            Op::Append {
                key: "l".into(),
                val: vec![0; 3],
            },
            Op::Delete { key: "k".into() },
        ];
        for op in ops {
            let mut buf = Vec::new();
            encode_request(&op, &mut buf);
            let args = parse_request(&buf).unwrap();
            assert!(args.len() >= 2, "{op:?}");
        }
        let mut buf = Vec::new();
        encode_request(
            &Op::Put {
                key: "k".into(),
                val: b"a\r\nb".to_vec(),
            },
            &mut buf,
        );
        assert_eq!(buf, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
    }

    #[test]
    fn malformed_requests_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"*",
            b"*1\r\n",
            b"*1\r\n$5\r\nab\r\n",
            b"*1\r\n$-1\r\n",
            b"*99999999999\r\n",
            b"*1\r\n$2\r\nab\r\nextra",
            b"*1\r\n$18446744073709551615\r\n",
            b"+OK\r\n",
        ] {
            assert!(parse_request(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_argument_count_reserves_only_what_the_bytes_can_back() {
        // 8 bytes claiming 65 536 arguments: refused before anything is reserved.
        let e = parse_request(b"*65536\r\n").unwrap_err();
        assert!(e.contains("claims 65536 arguments"), "{e}");
        // As many empty arguments as the bytes hold still parse.
        let mut req = b"*1000\r\n".to_vec();
        for _ in 0..1000 {
            req.extend_from_slice(b"$0\r\n\r\n");
        }
        let args = parse_request(&req).unwrap();
        assert_eq!(args.len(), 1000);
        assert!(args.capacity() <= 1000);
    }

    #[test]
    fn replies_decode_to_statuses_and_values() {
        let r = decode_reply(OpKind::Get, b"$3\r\nabc\r\n").unwrap();
        assert_eq!((r.status, r.vals), (Status::Ok, vec![b"abc".to_vec()]));
        assert_eq!(
            decode_reply(OpKind::Get, b"$-1\r\n").unwrap().status,
            Status::NotFound
        );
        assert_eq!(
            decode_reply(OpKind::GetFromList, b"-BADINDEX index out of range\r\n")
                .unwrap()
                .status,
            Status::BadIndex
        );
        let m = decode_reply(OpKind::GetM, b"*2\r\n$1\r\nx\r\n$-1\r\n").unwrap();
        assert_eq!(m.statuses, vec![Status::Ok, Status::NotFound]);
        assert_eq!(m.status, Status::NotFound);
        assert!(decode_reply(OpKind::Put, b"+OK\r\nx").is_err());
        assert!(decode_reply(OpKind::Get, b"-WHAT\r\n").is_err());
    }
}
