//! The process's default zero-copy threshold: the paper's 512 bytes, unless the user measured
//! their own machine (`calibrate run`, docs/calibration.md) and said so in the environment.
//!
//! Resolved once per process, the first time an [`Arena`](crate::Arena) is built without an
//! explicit threshold (or [`default_threshold`] is called), from, in order:
//!
//! 1. `CORNFLAKES_THRESHOLD=<bytes>`: the threshold itself (`0` = every pinned field
//!    zero-copy; `max` = copy everything);
//! 2. `CORNFLAKES_CALIBRATION=<path>`: a calibration file written by `calibrate run`; its
//!    top-level `"recommended_threshold"` is used;
//! 3. otherwise [`DEFAULT_THRESHOLD`] (512).
//!
//! A value that cannot be used (not a number, unreadable file, no recommendation in it) is
//! reported once on stderr and the built-in default is used; [`threshold_setting`] says so too.
//! The per-arena API ([`Arena::with_threshold`](crate::Arena::with_threshold)) is unchanged and
//! always wins.

use std::fmt;
use std::sync::OnceLock;

/// The default zero-copy threshold in bytes (paper §5): fields at least this long are sent by
/// scatter-gather when their memory is pinned.
pub const DEFAULT_THRESHOLD: usize = 512;

/// Environment variable holding the default threshold in bytes.
pub const THRESHOLD_ENV: &str = "CORNFLAKES_THRESHOLD";
/// Environment variable naming a calibration file (`calibrate run`'s `calibration.json`).
pub const CALIBRATION_ENV: &str = "CORNFLAKES_CALIBRATION";
/// The key of the recommended threshold in a calibration file.
pub const CALIBRATION_KEY: &str = "recommended_threshold";

/// Where the process's default threshold came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThresholdSource {
    /// The built-in default ([`DEFAULT_THRESHOLD`]), nothing set.
    BuiltIn,
    /// `CORNFLAKES_THRESHOLD`.
    Env,
    /// The calibration file at this path (`CORNFLAKES_CALIBRATION`).
    Calibration(String),
    /// The built-in default, because the setting could not be used (the reason).
    Invalid(String),
}

/// The resolved default threshold and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThresholdSetting {
    /// Bytes: fields at least this long are zero-copy when pinned.
    pub threshold: usize,
    /// Where it came from.
    pub source: ThresholdSource,
}

impl fmt::Display for ThresholdSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.threshold {
            usize::MAX => f.write_str("copy everything (max)")?,
            t => write!(f, "{t} B")?,
        }
        match &self.source {
            ThresholdSource::BuiltIn => write!(
                f,
                " (built-in default; {THRESHOLD_ENV} and {CALIBRATION_ENV} unset)"
            ),
            ThresholdSource::Env => write!(f, " (from {THRESHOLD_ENV})"),
            ThresholdSource::Calibration(p) => {
                write!(f, " (from calibration file {p}, {CALIBRATION_ENV})")
            }
            ThresholdSource::Invalid(why) => write!(f, " (built-in default: {why})"),
        }
    }
}

/// Parses a threshold in bytes: a decimal number, or `max` for "copy everything".
pub fn parse_threshold(s: &str) -> Result<usize, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("max") {
        return Ok(usize::MAX);
    }
    s.parse::<usize>()
        .map_err(|e| format!("{s:?} is not a byte count ({e}); expected e.g. 512, 0 or max"))
}

/// Reads the top-level `"recommended_threshold"` of a calibration file's text (JSON written
/// by `calibrate run`): a number, or `null` when scatter-gather never won in the measured
/// range. The runtime needs only this one value, so it does not depend on a JSON library.
pub fn threshold_from_calibration(text: &str) -> Result<usize, String> {
    let key = format!("\"{CALIBRATION_KEY}\"");
    let mut hits = text.match_indices(&key);
    let (at, _) = hits
        .next()
        .ok_or_else(|| format!("no {key} in the calibration file"))?;
    if hits.next().is_some() {
        return Err(format!(
            "{key} appears more than once in the calibration file"
        ));
    }
    let rest = text[at + key.len()..].trim_start();
    let rest = rest
        .strip_prefix(':')
        .ok_or_else(|| format!("{key} is not followed by ':'"))?
        .trim_start();
    if rest.starts_with("null") {
        return Err(format!(
            "the calibration recommends no threshold ({key} is null: scatter-gather did not win \
             for every K at any measured size); set {THRESHOLD_ENV} explicitly"
        ));
    }
    let digits: &str = &rest[..rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())];
    if digits.is_empty() {
        return Err(format!("{key} is not a non-negative integer"));
    }
    digits
        .parse::<usize>()
        .map_err(|e| format!("{key} {digits}: {e}"))
}

/// Resolves the default from the environment `var` gives (a function, so it can be tested
/// without touching the process environment) and `read` for the calibration file.
pub fn resolve(
    var: impl Fn(&str) -> Option<String>,
    read: impl Fn(&str) -> std::io::Result<String>,
) -> ThresholdSetting {
    let invalid = |why: String| ThresholdSetting {
        threshold: DEFAULT_THRESHOLD,
        source: ThresholdSource::Invalid(why),
    };
    if let Some(v) = var(THRESHOLD_ENV) {
        return match parse_threshold(&v) {
            Ok(threshold) => ThresholdSetting {
                threshold,
                source: ThresholdSource::Env,
            },
            Err(e) => invalid(format!("{THRESHOLD_ENV} ignored: {e}")),
        };
    }
    if let Some(path) = var(CALIBRATION_ENV) {
        return match read(&path)
            .map_err(|e| format!("reading it: {e}"))
            .and_then(|t| threshold_from_calibration(&t))
        {
            Ok(threshold) => ThresholdSetting {
                threshold,
                source: ThresholdSource::Calibration(path),
            },
            Err(e) => invalid(format!("{CALIBRATION_ENV}={path} ignored: {e}")),
        };
    }
    ThresholdSetting {
        threshold: DEFAULT_THRESHOLD,
        source: ThresholdSource::BuiltIn,
    }
}

static SETTING: OnceLock<ThresholdSetting> = OnceLock::new();

/// The process's default threshold and its source, resolved from the environment on first use
/// (see the module docs).
pub fn threshold_setting() -> &'static ThresholdSetting {
    SETTING.get_or_init(|| {
        let s = resolve(|k| std::env::var(k).ok(), |p| std::fs::read_to_string(p));
        if let ThresholdSource::Invalid(why) = &s.source {
            eprintln!(
                "cornflakes: zero-copy threshold {DEFAULT_THRESHOLD} B (built-in default): {why}"
            );
        }
        s
    })
}

/// The process's default zero-copy threshold in bytes (see [`threshold_setting`]).
#[inline]
pub fn default_threshold() -> usize {
    threshold_setting().threshold
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn no_file(_: &str) -> io::Result<String> {
        Err(io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    #[test]
    fn built_in_when_nothing_is_set() {
        let s = resolve(env(&[]), no_file);
        assert_eq!(s.threshold, 512);
        assert_eq!(s.source, ThresholdSource::BuiltIn);
        assert!(s.to_string().contains("built-in default"), "{s}");
    }

    #[test]
    fn env_wins_over_the_calibration_file() {
        let s = resolve(
            env(&[(THRESHOLD_ENV, "1024"), (CALIBRATION_ENV, "/x.json")]),
            |_| Ok(r#"{"recommended_threshold": 256}"#.to_owned()),
        );
        assert_eq!((s.threshold, s.source), (1024, ThresholdSource::Env));
        let s = resolve(env(&[(THRESHOLD_ENV, "max")]), no_file);
        assert_eq!(s.threshold, usize::MAX);
    }

    #[test]
    fn calibration_file_is_read() {
        let text = "{\n  \"cells\": [],\n  \"recommended_threshold\" : 256,\n  \"x\": 1\n}";
        let s = resolve(env(&[(CALIBRATION_ENV, "/c.json")]), |p| {
            assert_eq!(p, "/c.json");
            Ok(text.to_owned())
        });
        assert_eq!(s.threshold, 256);
        assert_eq!(s.source, ThresholdSource::Calibration("/c.json".into()));
        assert!(s.to_string().contains("/c.json"), "{s}");
    }

    #[test]
    fn unusable_settings_fall_back_with_the_reason() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: [Case; 5] = [
            (&[(THRESHOLD_ENV, "big")], "", "not a byte count"),
            (&[(CALIBRATION_ENV, "/missing")], "", "no such file"),
            (
                &[(CALIBRATION_ENV, "/c")],
                "{\"recommended_threshold\": null}",
                "is null",
            ),
            (
                &[(CALIBRATION_ENV, "/c")],
                "{\"threshold\": 5}",
                "no \"recommended_threshold\"",
            ),
            (
                &[(CALIBRATION_ENV, "/c")],
                "{\"recommended_threshold\": -3}",
                "non-negative",
            ),
        ];
        for (vars, text, why) in cases {
            let read = |p: &str| {
                if p == "/missing" {
                    no_file(p)
                } else {
                    Ok(text.to_owned())
                }
            };
            let s = resolve(env(vars), read);
            assert_eq!(s.threshold, DEFAULT_THRESHOLD);
            match &s.source {
                ThresholdSource::Invalid(m) => assert!(m.contains(why), "{m:?} lacks {why:?}"),
                other => panic!("{vars:?}: {other:?}"),
            }
        }
    }
}
