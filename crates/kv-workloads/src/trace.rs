//! Reader of the public Twitter cache trace format (twitter/cache-trace): one request per CSV
//! line, `timestamp,anonymized key,key size,value size,client id,operation,TTL`.

use crate::WorkloadError;
use serde::Serialize;

/// The operation of a trace record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum TraceOp {
    /// `get`
    Get,
    /// `gets`
    Gets,
    /// `set`
    Set,
    /// `add`
    Add,
    /// `replace`
    Replace,
    /// `cas`
    Cas,
    /// `append`
    Append,
    /// `prepend`
    Prepend,
    /// `delete`
    Delete,
    /// `incr`
    Incr,
    /// `decr`
    Decr,
}

impl TraceOp {
    /// Parses the trace's operation name (lower case, as in the trace).
    pub fn parse(s: &str) -> Option<TraceOp> {
        Some(match s {
            "get" => TraceOp::Get,
            "gets" => TraceOp::Gets,
            "set" => TraceOp::Set,
            "add" => TraceOp::Add,
            "replace" => TraceOp::Replace,
            "cas" => TraceOp::Cas,
            "append" => TraceOp::Append,
            "prepend" => TraceOp::Prepend,
            "delete" => TraceOp::Delete,
            "incr" => TraceOp::Incr,
            "decr" => TraceOp::Decr,
            _ => return None,
        })
    }

    /// The trace's name of the operation.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceOp::Get => "get",
            TraceOp::Gets => "gets",
            TraceOp::Set => "set",
            TraceOp::Add => "add",
            TraceOp::Replace => "replace",
            TraceOp::Cas => "cas",
            TraceOp::Append => "append",
            TraceOp::Prepend => "prepend",
            TraceOp::Delete => "delete",
            TraceOp::Incr => "incr",
            TraceOp::Decr => "decr",
        }
    }
}

/// One line of the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceRecord {
    /// Seconds since the trace's start.
    pub timestamp: u64,
    /// The anonymized key.
    pub key: String,
    /// Size of the original key, bytes.
    pub key_size: u32,
    /// Size of the value, bytes (0 for misses and deletes).
    pub value_size: u32,
    /// The client's id.
    pub client_id: u64,
    /// The operation.
    pub op: TraceOp,
    /// Time to live, seconds (0: none).
    pub ttl: u64,
}

/// Parses one trace line. The key may itself contain commas: the two fields before the last
/// five are timestamp and key, so the line is split from both ends.
pub fn parse_trace_line(line: &str) -> Result<TraceRecord, String> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (timestamp, rest) = line
        .split_once(',')
        .ok_or_else(|| format!("expected 7 comma-separated fields: {line:?}"))?;
    let mut tail = rest.rsplitn(6, ',');
    let ttl = tail.next();
    let op = tail.next();
    let client = tail.next();
    let vsize = tail.next();
    let ksize = tail.next();
    let key = tail.next();
    let (Some(ttl), Some(op), Some(client), Some(vsize), Some(ksize), Some(key)) =
        (ttl, op, client, vsize, ksize, key)
    else {
        return Err(format!("expected 7 comma-separated fields: {line:?}"));
    };
    let num = |what: &str, s: &str| -> Result<u64, String> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("{what} is not a non-negative integer: {s:?}"))
    };
    let small = |what: &str, s: &str| -> Result<u32, String> {
        u32::try_from(num(what, s)?).map_err(|_| format!("{what} too large: {s:?}"))
    };
    if key.is_empty() {
        return Err("empty key".into());
    }
    Ok(TraceRecord {
        timestamp: num("timestamp", timestamp)?,
        key: key.to_owned(),
        key_size: small("key size", ksize)?,
        value_size: small("value size", vsize)?,
        client_id: num("client id", client)?,
        op: TraceOp::parse(op.trim()).ok_or_else(|| format!("unknown operation {op:?}"))?,
        ttl: num("TTL", ttl)?,
    })
}

/// Reads up to `max` records of a trace file, stopping at the first malformed line with an
/// error naming the file and line.
pub(crate) fn read_trace(
    path: &std::path::Path,
    max: usize,
    mut each: impl FnMut(TraceRecord),
) -> Result<usize, WorkloadError> {
    use std::io::BufRead;
    let f = std::fs::File::open(path)
        .map_err(|e| WorkloadError::Trace(format!("{}: {e}", path.display())))?;
    let mut n = 0;
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        if n >= max {
            break;
        }
        let line =
            line.map_err(|e| WorkloadError::Trace(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec = parse_trace_line(&line)
            .map_err(|e| WorkloadError::Trace(format!("{}:{}: {e}", path.display(), i + 1)))?;
        each(rec);
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_published_format() {
        let r = parse_trace_line("5,q:q:1:8WTfjZU,10,162,17,get,0").unwrap();
        assert_eq!(r.timestamp, 5);
        assert_eq!(r.key, "q:q:1:8WTfjZU");
        assert_eq!(
            (r.key_size, r.value_size, r.client_id, r.ttl),
            (10, 162, 17, 0)
        );
        assert_eq!(r.op, TraceOp::Get);
        let r = parse_trace_line("0,a,b,c,12,3000,4,set,600\r\n").unwrap();
        assert_eq!(r.key, "a,b,c");
        assert_eq!(r.op, TraceOp::Set);
        assert_eq!(r.ttl, 600);
    }

    #[test]
    fn malformed_lines_say_why() {
        for (line, why) in [
            ("", "7 comma-separated"),
            ("1,k,2,3,4,get", "7 comma-separated"),
            ("x,k,2,3,4,get,0", "timestamp"),
            ("1,k,2,-3,4,get,0", "value size"),
            ("1,k,2,3,4,fetch,0", "unknown operation"),
            ("1,k,99999999999,3,4,get,0", "key size too large"),
            ("1,,2,3,4,get,0", "empty key"),
        ] {
            let e = parse_trace_line(line).unwrap_err();
            assert!(e.contains(why), "{line:?}: {e}");
        }
    }
}
