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
//!
//! The protocol itself (parsing, writing, reading replies back) is the `resp` crate's; this
//! module maps commands to the store's operations ([`RespRequest`]), which
//! [`exec::execute`] runs as for every serialization, and writes the [`Answer`] as Redis
//! would. The server's parser and `getm` list are reused and the reply is sized first
//! ([`::resp::Len`]) and written straight into the transmit buffer, so a request allocates
//! nothing on the heap.

use ::resp::{Args, Frame, Int, Len, Out, Parser, Reader, SliceOut};
use cornflakes::{ConnId, Datapath, Msg, SendError};
use cornflakes_rpc::once::Incoming;

use crate::exec::{self, Answer, Items};
use crate::ops::{Op, OpKind, Reply, Status};
use crate::store::{Store, Value};
use crate::validate;
use cornflakes_rpc::Unanswered;

pub use ::resp::MAX_ARGS;

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

fn word_status(w: &[u8]) -> Option<Status> {
    [
        Status::NotFound,
        Status::BadIndex,
        Status::TooLarge,
        Status::StoreFull,
        Status::BadRequest,
    ]
    .into_iter()
    .find(|s| err_word(*s).as_bytes() == w)
}

/// A RESP request as the store's operations see it ([`exec::Request`]): the command
/// (matched ignoring case, as Redis does) and its arguments, borrowed from the request.
pub struct RespRequest<'a, 'p> {
    args: Args<'a, 'p>,
    kind: OpKind,
    index: usize,
}

impl<'a, 'p> RespRequest<'a, 'p> {
    /// The operation `args` names, with the arguments it takes. An unknown command, a wrong
    /// number of arguments, an `LRANGE` other than `0 -1` or an `LINDEX` whose index is not a
    /// number is malformed.
    pub fn decode(args: Args<'a, 'p>) -> Result<Self, Unanswered> {
        let n = args.len();
        let bad = |why: &str| {
            Unanswered::Malformed(format!(
                "{}: {why}",
                String::from_utf8_lossy(args.command())
            ))
        };
        let mut index = 0;
        let kind = if args.is("GET") && n == 2 {
            OpKind::Get
        } else if args.is("SET") && n == 3 {
            OpKind::Put
        } else if args.is("MGET") && n >= 2 {
            OpKind::GetM
        } else if args.is("MSET") && n >= 3 && n % 2 == 1 {
            OpKind::PutM
        } else if args.is("LRANGE") && n == 4 {
            if args.arg(2) != b"0" || args.arg(3) != b"-1" {
                return Err(bad("only LRANGE key 0 -1 (the whole list) is supported"));
            }
            OpKind::GetList
        } else if args.is("LINDEX") && n == 3 {
            index = parse_index(args.arg(2)).ok_or_else(|| bad("index is not a number"))?;
            OpKind::GetFromList
        } else if args.is("RPUSH") && n == 3 {
            OpKind::Append
        } else if args.is("DEL") && n == 2 {
            OpKind::Delete
        } else {
            return Err(bad("unknown command or wrong number of arguments"));
        };
        Ok(RespRequest { args, kind, index })
    }

    /// The operation.
    pub fn op(&self) -> OpKind {
        self.kind
    }
}

impl exec::Request for RespRequest<'_, '_> {
    fn kind(&self) -> OpKind {
        self.kind
    }
    fn key_count(&self) -> usize {
        match self.kind {
            OpKind::GetM => self.args.len() - 1,
            OpKind::PutM => (self.args.len() - 1) / 2,
            _ => 1,
        }
    }
    fn key(&self, i: usize) -> Result<&str, Status> {
        let at = match self.kind {
            OpKind::GetM => 1 + i,
            OpKind::PutM => 1 + 2 * i,
            _ if i == 0 => 1,
            _ => return Err(Status::BadRequest),
        };
        self.args
            .get(at)
            .map_or(Err(Status::BadRequest), validate::key)
    }
    fn val_count(&self) -> usize {
        match self.kind {
            OpKind::PutM => (self.args.len() - 1) / 2,
            OpKind::Put | OpKind::Append => 1,
            _ => 0,
        }
    }
    fn val(&self, i: usize) -> &[u8] {
        let at = match self.kind {
            OpKind::PutM => 2 + 2 * i,
            OpKind::Put | OpKind::Append if i == 0 => 2,
            _ => return &[],
        };
        self.args.get(at).unwrap_or_default()
    }
    fn index(&self) -> usize {
        self.index
    }
}

fn parse_index(a: &[u8]) -> Option<usize> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// A stored value as a bulk string (a value stored in pieces is written whole).
fn bulk_value(o: &mut impl Out, v: &Value) {
    o.bulk_header(v.len());
    for b in v.pieces() {
        o.put(b);
    }
    o.bulk_end();
}

/// A failure as an error reply whose first word names the status.
fn error(o: &mut impl Out, s: Status) {
    let what = match s {
        Status::NotFound => "no such key",
        Status::BadIndex => "index out of range",
        Status::TooLarge => "value too large",
        Status::StoreFull => "store memory limit reached",
        Status::BadRequest => "invalid request (key not UTF-8, or wrong arguments)",
        Status::Ok => "ok",
    };
    o.error(err_word(s), what);
}

/// Writes the reply to a request of `kind` that was answered `a`, as Redis answers the
/// command (table above).
fn write_answer(o: &mut impl Out, kind: OpKind, a: &Answer<'_, '_>) {
    match a {
        Answer::Refused(s) => error(o, *s),
        Answer::Wrote(r) => match (kind, r) {
            (OpKind::Append, Ok(n)) => o.integer(*n as i64),
            (OpKind::Delete, Ok(_)) => o.integer(1),
            (OpKind::Delete, Err(Status::NotFound)) => o.integer(0),
            (_, Ok(_)) => o.simple(b"OK"),
            (_, Err(s)) => error(o, *s),
        },
        Answer::Value(Ok(v)) => bulk_value(o, v),
        Answer::Value(Err(Status::NotFound)) => o.null_bulk(),
        Answer::Value(Err(s)) => error(o, *s),
        Answer::List(Ok(list)) => {
            o.array(list.len());
            for v in list.iter() {
                bulk_value(o, v);
            }
        }
        Answer::List(Err(Status::NotFound)) => o.null_array(),
        Answer::List(Err(s)) => error(o, *s),
        Answer::Values(items) => {
            o.array(items.len());
            for it in items.iter() {
                match it {
                    Ok(v) => bulk_value(o, v),
                    Err(_) => o.null_bulk(),
                }
            }
        }
    }
}

/// Handles one RESP request: parses it with the server's `parser`, runs it
/// ([`exec::execute`]), and writes the reply straight into one pinned transmit buffer sized
/// for it (or `-TOOLARGE` when the reply exceeds one buffer or message). Once the parser's
/// and `items`' lists have grown to the largest request, nothing is allocated.
#[allow(clippy::too_many_arguments)]
pub fn serve<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    parser: &mut Parser,
    items: &mut Items,
    conn: ConnId,
    msg: Msg,
    data: &[u8],
) -> Result<(), Unanswered> {
    let args = parser
        .parse(data)
        .map_err(|e| Unanswered::Malformed(e.to_string()))?;
    let req = RespRequest::decode(args)?;
    let kind = req.kind;
    // Only a getm takes (and gives back) the reused result list.
    let mut getm = if kind == OpKind::GetM {
        items.take()
    } else {
        Vec::new()
    };
    let tag = || Incoming::new(msg, data, || dp.peer_addr(conn));
    let answer = exec::execute(store, &req, tag, &mut getm);
    let sent = send_answer(dp, conn, msg, kind, &answer);
    if kind == OpKind::GetM {
        items.put_back(getm);
    }
    sent
}

fn send_answer<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    kind: OpKind,
    answer: &Answer<'_, '_>,
) -> Result<(), Unanswered> {
    let mut len = Len::default();
    write_answer(&mut len, kind, answer);
    let mem = dp.memory();
    if len.0 > mem.max_item_size().min(dp.max_message_len()) {
        let mut e = [0u8; 64];
        let mut o = SliceOut::new(&mut e);
        error(&mut o, Status::TooLarge);
        let n = o.written();
        return Ok(dp.send_copy(conn, msg, &e[..n])?);
    }
    let mut out = mem.alloc(len.0).map_err(SendError::from)?;
    let mut o = SliceOut::new(&mut out);
    write_answer(&mut o, kind, answer);
    let n = o
        .finish()
        .map_err(|e| Unanswered::Send(SendError::Io(std::io::Error::other(e))))?;
    out.set_len(n);
    Ok(dp.send_sga(conn, msg, &[out.freeze()])?)
}

/// Appends the RESP encoding of request `op` (a command, as a Redis client sends it).
pub fn encode_request(op: &Op, out: &mut Vec<u8>) {
    let cmd = |out: &mut Vec<u8>, name: &[u8], n: usize| {
        out.array(n);
        out.bulk(name);
    };
    match op {
        Op::Get { key } => {
            cmd(out, b"GET", 2);
            out.bulk(key.as_bytes());
        }
        Op::Put { key, val } => out.command(&[b"SET", key.as_bytes(), val]),
        Op::GetM { keys } => {
            cmd(out, b"MGET", 1 + keys.len());
            keys.iter().for_each(|k| out.bulk(k.as_bytes()));
        }
        Op::PutM { keys, vals } => {
            cmd(out, b"MSET", 1 + 2 * keys.len().min(vals.len()));
            for (k, v) in keys.iter().zip(vals) {
                out.bulk(k.as_bytes());
                out.bulk(v);
            }
        }
        Op::GetList { key } => out.command(&[b"LRANGE", key.as_bytes(), b"0", b"-1"]),
        Op::GetFromList { key, index } => out.command(&[
            b"LINDEX",
            key.as_bytes(),
            Int::new(i64::from(*index)).as_bytes(),
        ]),
        Op::Append { key, val } => out.command(&[b"RPUSH", key.as_bytes(), val]),
        Op::Delete { key } => out.command(&[b"DEL", key.as_bytes()]),
    }
}

/// A bulk-string element of a reply (or an error naming a status): its status and value.
fn reply_value(r: &mut Reader<'_>) -> Result<(Status, Option<Vec<u8>>), String> {
    match r.frame().map_err(|e| e.to_string())? {
        Frame::Error(l) => Ok((error_status(l)?, None)),
        Frame::Bulk(Some(b)) => Ok((Status::Ok, Some(b.to_vec()))),
        Frame::Bulk(None) => Ok((Status::NotFound, None)),
        f => Err(format!("expected a bulk string, got {f:?}")),
    }
}

/// The status an error reply's first word names.
fn error_status(l: &[u8]) -> Result<Status, String> {
    let word = l.split(|c| *c == b' ').next().unwrap_or_default();
    word_status(word).ok_or_else(|| format!("error reply {:?}", String::from_utf8_lossy(l)))
}

/// Decodes the RESP reply to a request of `kind`.
pub fn decode_reply(kind: OpKind, payload: &[u8]) -> Result<Reply, String> {
    let mut c = Reader::new(payload);
    let e = |e: ::resp::ProtocolError| e.to_string();
    if payload.is_empty() {
        return Err("empty reply".to_owned());
    }
    let r = if payload[0] == b'-' {
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
            OpKind::Put | OpKind::PutM => match c.frame().map_err(e)? {
                Frame::Simple(b"OK") => Reply::status(Status::Ok),
                f => return Err(format!("expected +OK, got {f:?}")),
            },
            OpKind::Append => match c.frame().map_err(e)? {
                Frame::Integer(_) => Reply::status(Status::Ok),
                f => return Err(format!("expected an integer, got {f:?}")),
            },
            OpKind::Delete => match c.frame().map_err(e)? {
                Frame::Integer(1) => Reply::status(Status::Ok),
                Frame::Integer(0) => Reply::status(Status::NotFound),
                f => return Err(format!("DEL answered {f:?}")),
            },
            OpKind::GetList | OpKind::GetM => match c.frame().map_err(e)? {
                Frame::Array(None) => Reply::status(Status::NotFound),
                Frame::Array(Some(n)) => {
                    let mut r = Reply::status(Status::Ok);
                    for _ in 0..n {
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
                f => return Err(format!("expected an array, got {f:?}")),
            },
        }
    };
    c.finish().map_err(e)?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Request as _;

    #[test]
    fn requests_round_trip_through_the_parser() {
        let ops = [
            (Op::Get { key: "k".into() }, OpKind::Get),
            (
                Op::Put {
                    key: "k".into(),
                    val: b"a\r\nb".to_vec(),
                },
                OpKind::Put,
            ),
            (
                Op::GetM {
                    keys: vec!["a".into(), "b".into()],
                },
                OpKind::GetM,
            ),
            (
                Op::PutM {
                    keys: vec!["a".into()],
                    vals: vec![vec![]],
                },
                OpKind::PutM,
            ),
            (Op::GetList { key: "l".into() }, OpKind::GetList),
            (
                Op::GetFromList {
                    key: "l".into(),
                    index: 12,
                },
                OpKind::GetFromList,
            ),
            (
                Op::Append {
                    key: "l".into(),
                    val: vec![0; 3],
                },
                OpKind::Append,
            ),
            (Op::Delete { key: "k".into() }, OpKind::Delete),
        ];
        let mut p = Parser::new();
        for (op, kind) in ops {
            let mut buf = Vec::new();
            encode_request(&op, &mut buf);
            let req =
                RespRequest::decode(p.parse(&buf).unwrap()).unwrap_or_else(|_| panic!("{op:?}"));
            assert_eq!(req.op(), kind);
            assert!(req.key(0).is_ok(), "{op:?}");
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
        let mut buf = Vec::new();
        encode_request(
            &Op::PutM {
                keys: vec!["a".into(), "b".into()],
                vals: vec![b"1".to_vec(), b"22".to_vec()],
            },
            &mut buf,
        );
        let req = RespRequest::decode(p.parse(&buf).unwrap()).unwrap();
        assert_eq!((req.key_count(), req.val_count()), (2, 2));
        assert_eq!((req.key(1), req.val(1)), (Ok("b"), &b"22"[..]));
        assert_eq!(req.key(2), Err(Status::BadRequest));
    }

    #[test]
    fn unknown_commands_and_wrong_arguments_are_malformed() {
        let mut p = Parser::new();
        for args in [
            &[&b"GET"[..]][..],
            &[b"GET", b"a", b"b"],
            &[b"MSET", b"a", b"1", b"b"],
            &[b"LRANGE", b"l", b"1", b"2"],
            &[b"LINDEX", b"l", b"x"],
            &[b"FLUSHALL"],
        ] {
            let mut buf = Vec::new();
            buf.command(args);
            let r = RespRequest::decode(p.parse(&buf).unwrap());
            assert!(matches!(r, Err(Unanswered::Malformed(_))), "{args:?}");
        }
        // Command names ignore case, as in Redis.
        let mut buf = Vec::new();
        buf.command(&[b"get", b"k"]);
        assert!(RespRequest::decode(p.parse(&buf).unwrap()).is_ok());
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
        assert!(decode_reply(OpKind::Get, b"").is_err());
    }
}
