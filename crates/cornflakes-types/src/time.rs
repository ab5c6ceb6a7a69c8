//! `Timestamp` ↔ `SystemTime` and `Duration` ↔ `std::time::Duration`, checked against the
//! ranges protobuf documents (a Timestamp is within years 1 to 9999, a Duration within
//! ±10 000 years, nanos normalised), and their JSON text (RFC 3339, `"1.5s"`).

use std::fmt;
use std::time::{Duration as StdDuration, SystemTime, UNIX_EPOCH};

use cornflakes::Arena;

use crate::{Duration, Timestamp};

/// Seconds of `0001-01-01T00:00:00Z`, the earliest valid `Timestamp`.
pub const MIN_TIMESTAMP_SECONDS: i64 = -62_135_596_800;
/// Seconds of `9999-12-31T23:59:59Z`, the latest valid `Timestamp`.
pub const MAX_TIMESTAMP_SECONDS: i64 = 253_402_300_799;
/// The largest `Duration`, in seconds (about 10 000 years); the smallest is its negation.
pub const MAX_DURATION_SECONDS: i64 = 315_576_000_000;

/// A value outside what a well-known type, or the Rust type it converts to, can hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeError(String);

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RangeError {}

fn range(message: String) -> RangeError {
    RangeError(message)
}

/// Checks `seconds`/`nanos` as a `Timestamp`.
fn check_timestamp(seconds: i64, nanos: i32) -> Result<(), RangeError> {
    if !(MIN_TIMESTAMP_SECONDS..=MAX_TIMESTAMP_SECONDS).contains(&seconds) {
        return Err(range(format!(
            "Timestamp seconds {seconds} outside 0001-01-01 to 9999-12-31 ({MIN_TIMESTAMP_SECONDS} to {MAX_TIMESTAMP_SECONDS})"
        )));
    }
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(range(format!(
            "Timestamp nanos {nanos} outside 0 to 999999999"
        )));
    }
    Ok(())
}

/// Checks `seconds`/`nanos` as a `Duration`.
fn check_duration(seconds: i64, nanos: i32) -> Result<(), RangeError> {
    if !(-MAX_DURATION_SECONDS..=MAX_DURATION_SECONDS).contains(&seconds) {
        return Err(range(format!(
            "Duration seconds {seconds} outside ±{MAX_DURATION_SECONDS}"
        )));
    }
    if !(-999_999_999..=999_999_999).contains(&nanos)
        || (seconds > 0 && nanos < 0)
        || (seconds < 0 && nanos > 0)
    {
        return Err(range(format!(
            "Duration nanos {nanos} outside ±999999999 or of another sign than seconds {seconds}"
        )));
    }
    Ok(())
}

impl<'a> Timestamp<'a> {
    /// The timestamp of `t`, in `arena`; refused outside years 1 to 9999.
    pub fn from_system_time(t: SystemTime, arena: &'a Arena) -> Result<Self, RangeError> {
        let (seconds, nanos) = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => (
                i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                d.subsec_nanos() as i32,
            ),
            Err(e) => {
                let d = e.duration();
                let s = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                match d.subsec_nanos() {
                    0 => (-s, 0),
                    n => (-s - 1, 1_000_000_000 - n as i32),
                }
            }
        };
        check_timestamp(seconds, nanos)?;
        let mut ts = Timestamp::new_in(arena);
        ts.set_seconds(seconds);
        ts.set_nanos(nanos);
        Ok(ts)
    }

    /// The `SystemTime` this timestamp names; refused when it is not a valid timestamp.
    pub fn to_system_time(&self) -> Result<SystemTime, RangeError> {
        let (s, n) = (self.get_seconds(), self.get_nanos());
        check_timestamp(s, n)?;
        let t = if s >= 0 {
            UNIX_EPOCH.checked_add(StdDuration::new(s as u64, n as u32))
        } else {
            UNIX_EPOCH
                .checked_sub(StdDuration::from_secs(s.unsigned_abs()))
                .and_then(|t| t.checked_add(StdDuration::from_nanos(n as u64)))
        };
        t.ok_or_else(|| {
            range(format!(
                "Timestamp {s}s is outside this system's SystemTime"
            ))
        })
    }

    /// The RFC 3339 text of protobuf's JSON mapping (`1972-01-01T10:00:20.021Z`).
    pub fn to_rfc3339(&self) -> Result<String, RangeError> {
        timestamp_to_rfc3339(self.get_seconds(), self.get_nanos())
    }
}

impl TryFrom<&Timestamp<'_>> for SystemTime {
    type Error = RangeError;
    fn try_from(t: &Timestamp<'_>) -> Result<SystemTime, RangeError> {
        t.to_system_time()
    }
}

impl<'a> Duration<'a> {
    /// The duration of `d`, in `arena`; refused above 10 000 years.
    pub fn from_std(d: StdDuration, arena: &'a Arena) -> Result<Self, RangeError> {
        let seconds = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        let nanos = d.subsec_nanos() as i32;
        check_duration(seconds, nanos)?;
        let mut out = Duration::new_in(arena);
        out.set_seconds(seconds);
        out.set_nanos(nanos);
        Ok(out)
    }

    /// The `std::time::Duration`; refused when negative (std's cannot be) or not a valid
    /// duration.
    pub fn to_std(&self) -> Result<StdDuration, RangeError> {
        let (s, n) = (self.get_seconds(), self.get_nanos());
        check_duration(s, n)?;
        if s < 0 || n < 0 {
            return Err(range(format!(
                "Duration {s}s {n}ns is negative; std::time::Duration cannot be"
            )));
        }
        Ok(StdDuration::new(s as u64, n as u32))
    }
}

impl TryFrom<&Duration<'_>> for StdDuration {
    type Error = RangeError;
    fn try_from(d: &Duration<'_>) -> Result<StdDuration, RangeError> {
        d.to_std()
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) → days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Nanoseconds as protobuf's JSON writes them: none, or 3, 6 or 9 digits.
fn fraction(nanos: u32) -> String {
    if nanos == 0 {
        String::new()
    } else if nanos.is_multiple_of(1_000_000) {
        format!(".{:03}", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!(".{:06}", nanos / 1_000)
    } else {
        format!(".{nanos:09}")
    }
}

/// A timestamp's RFC 3339 text in UTC, as protobuf's JSON mapping writes it.
pub fn timestamp_to_rfc3339(seconds: i64, nanos: i32) -> Result<String, RangeError> {
    check_timestamp(seconds, nanos)?;
    let (y, mo, d) = civil_from_days(seconds.div_euclid(86_400));
    let secs = seconds.rem_euclid(86_400);
    Ok(format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}{}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        fraction(nanos as u32)
    ))
}

/// Parses RFC 3339 text (`Z` or a `±hh:mm` offset, up to 9 fraction digits) into
/// (seconds, nanos); refused outside years 1 to 9999.
pub fn timestamp_from_rfc3339(text: &str) -> Result<(i64, i32), RangeError> {
    let bad = || range(format!("`{text}` is not an RFC 3339 timestamp"));
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Result<i64, RangeError> {
        let s = text.get(from..from + len).ok_or_else(bad)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, s) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 59 {
        return Err(bad());
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b.get(i) == Some(&b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 9 {
            return Err(bad());
        }
        nanos = num(i + 1, digits)? * 10i64.pow(9 - digits as u32);
        i += 1 + digits;
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let o = num(i + 1, 2)? * 3600 + num(i + 4, 2)? * 60;
            if sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    if civil_from_days(days) != (y, mo as u32, d as u32) {
        return Err(bad());
    }
    let seconds = days * 86_400 + h * 3600 + mi * 60 + s - offset;
    check_timestamp(seconds, nanos as i32)?;
    Ok((seconds, nanos as i32))
}

/// A duration's JSON text (`"-1.5s"`, `"3s"`, `"0.000001s"`).
pub fn duration_to_json(seconds: i64, nanos: i32) -> Result<String, RangeError> {
    check_duration(seconds, nanos)?;
    let sign = if seconds < 0 || nanos < 0 { "-" } else { "" };
    Ok(format!(
        "{sign}{}{}s",
        seconds.unsigned_abs(),
        fraction(nanos.unsigned_abs())
    ))
}

/// Parses a duration's JSON text into (seconds, nanos).
pub fn duration_from_json(text: &str) -> Result<(i64, i32), RangeError> {
    let bad = || range(format!("`{text}` is not a duration (\"1.5s\")"));
    let body = text.strip_suffix('s').ok_or_else(bad)?;
    let (neg, body) = match body.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, body),
    };
    let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
    if whole.is_empty()
        || !whole.bytes().all(|c| c.is_ascii_digit())
        || frac.len() > 9
        || !frac.bytes().all(|c| c.is_ascii_digit())
        || (body.contains('.') && frac.is_empty())
    {
        return Err(bad());
    }
    let s: i64 = whole.parse().map_err(|_| bad())?;
    let n: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<i64>().map_err(|_| bad())? * 10i64.pow(9 - frac.len() as u32)
    };
    let (s, n) = if neg {
        (-s, -(n as i32))
    } else {
        (s, n as i32)
    };
    check_duration(s, n)?;
    Ok((s, n))
}
