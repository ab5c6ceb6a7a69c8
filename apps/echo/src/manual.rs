//! The hand-written message format of the paper's Figure 1 baselines: a count, one length per
//! field, then the fields back to back.
//!
//! ```text
//! u32 count | u32 len[0] … u32 len[count-1] | field 0 | … | field count-1     (little endian)
//! ```
//!
//! A tree is sent as its leaves in order (the tree structure is implied by the message type):
//! the hand-written baselines show what copying costs, not how to encode nesting.

use std::fmt;
use std::ops::Range;

use crate::shape::{fill_values, Kind, ValueChecker, MAX_VALUES};

/// Bytes of the header for `count` fields.
pub fn header_len(count: usize) -> usize {
    4 + 4 * count
}

/// Why a hand-written message was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// Shorter than its header says.
    Truncated,
    /// More fields than [`MAX_VALUES`], or a count the message type does not allow.
    BadCount(usize),
    /// The field lengths do not add up to the bytes after the header.
    LengthMismatch,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Truncated => write!(f, "message shorter than its header"),
            FormatError::BadCount(n) => write!(f, "{n} fields not allowed for this message type"),
            FormatError::LengthMismatch => write!(f, "field lengths do not match the message"),
        }
    }
}

impl std::error::Error for FormatError {}

fn read_u32(buf: &[u8], at: usize) -> Result<usize, FormatError> {
    let b = buf.get(at..at + 4).ok_or(FormatError::Truncated)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Parses a message of `kind`: appends each field's byte range (into `buf`) to `fields`.
pub fn parse(buf: &[u8], kind: Kind, fields: &mut Vec<Range<usize>>) -> Result<(), FormatError> {
    fields.clear();
    let count = read_u32(buf, 0)?;
    if count > MAX_VALUES || !kind.accepts(count) {
        return Err(FormatError::BadCount(count));
    }
    let mut at = header_len(count);
    if buf.len() < at {
        return Err(FormatError::Truncated);
    }
    for i in 0..count {
        let len = read_u32(buf, 4 + 4 * i)?;
        let end = at.checked_add(len).ok_or(FormatError::LengthMismatch)?;
        if end > buf.len() {
            return Err(FormatError::LengthMismatch);
        }
        fields.push(at..end);
        at = end;
    }
    if at != buf.len() {
        return Err(FormatError::LengthMismatch);
    }
    Ok(())
}

/// Writes the header for fields of these lengths into `out` (exactly `header_len` bytes).
pub fn write_header(out: &mut [u8], count: usize, lens: impl IntoIterator<Item = usize>) {
    out[..4].copy_from_slice(&(count as u32).to_le_bytes());
    for (i, l) in lens.into_iter().take(count).enumerate() {
        out[4 + 4 * i..8 + 4 * i].copy_from_slice(&(l as u32).to_le_bytes());
    }
}

/// Encodes request `id` of `spec` into `out` (cleared first), using `values` as scratch.
pub fn encode_request(
    id: u64,
    spec: &crate::shape::ShapeSpec,
    values: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    fill_values(id, spec, values);
    out.clear();
    out.resize(header_len(spec.count), 0);
    write_header(out, spec.count, std::iter::repeat(spec.len));
    out.extend_from_slice(values);
}

/// Whether `payload` is the hand-written encoding of request `id` of `spec`.
pub fn check_response(id: u64, spec: &crate::shape::ShapeSpec, payload: &[u8]) -> bool {
    let mut fields = Vec::with_capacity(spec.count);
    if parse(payload, spec.kind, &mut fields).is_err() {
        return false;
    }
    let mut c = ValueChecker::new(id, spec);
    for r in fields {
        c.visit(&payload[r]);
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::ShapeSpec;

    #[test]
    fn encode_parse_check() {
        let spec = ShapeSpec::tree(2, 5);
        let (mut vals, mut out) = (Vec::new(), Vec::new());
        encode_request(9, &spec, &mut vals, &mut out);
        assert_eq!(out.len(), header_len(4) + 20);
        let mut f = Vec::new();
        parse(&out, Kind::Tree(2), &mut f).unwrap();
        assert_eq!(f, vec![20..25, 25..30, 30..35, 35..40]);
        assert!(check_response(9, &spec, &out));
        assert!(!check_response(10, &spec, &out));
    }

    #[test]
    fn bad_messages_are_rejected() {
        let mut f = Vec::new();
        assert_eq!(parse(&[], Kind::List, &mut f), Err(FormatError::Truncated));
        assert_eq!(
            parse(&[1, 0, 0], Kind::List, &mut f),
            Err(FormatError::Truncated)
        );
        // Count says 2 but only one length present.
        assert_eq!(
            parse(&[2, 0, 0, 0, 1, 0, 0, 0], Kind::List, &mut f),
            Err(FormatError::Truncated)
        );
        // Huge length.
        let m = [1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1];
        assert_eq!(
            parse(&m, Kind::List, &mut f),
            Err(FormatError::LengthMismatch)
        );
        // Trailing bytes.
        let m = [1, 0, 0, 0, 1, 0, 0, 0, 7, 8];
        assert_eq!(
            parse(&m, Kind::List, &mut f),
            Err(FormatError::LengthMismatch)
        );
        // Wrong count for the kind.
        let m = [2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            parse(&m, Kind::Single, &mut f),
            Err(FormatError::BadCount(2))
        );
        assert!(parse(&m, Kind::List, &mut f).is_ok());
        let m = [0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            parse(&m, Kind::List, &mut f),
            Err(FormatError::BadCount(_))
        ));
    }
}
