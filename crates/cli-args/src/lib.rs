//! The flags of a command line: `--flag value`, `--switch`, comma lists and seconds, each read
//! once by whoever needs it, and whatever is left refused ([`Args::finish`]). The apps' main
//! programs, the bench binaries (echo, kv, calibrate, kv-peers, redis-cf-bench, tcp-echo) and
//! the server launcher read their arguments with it, so every command parses them the same way;
//! the load flags every load-generating command shares are read on top of it by
//! `loadgen::args`.
//!
//! ```
//! use cli_args::Args;
//!
//! let mut a = Args::from_line("--rates 1000,2000 --spin --duration 0.5");
//! assert_eq!(a.list::<f64>("--rates")?, Some(vec![1000.0, 2000.0]));
//! assert!(a.switch("--spin"));
//! assert_eq!(a.secs("--duration")?, Some(std::time::Duration::from_millis(500)));
//! a.finish()?;
//! # Ok::<(), String>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::str::FromStr;
use std::time::Duration;

/// The arguments after a subcommand; each accessor removes what it reads, and
/// [`finish`](Args::finish) refuses whatever is left.
#[derive(Clone, Debug)]
pub struct Args {
    rest: Vec<String>,
}

impl Args {
    /// The arguments to parse, in order.
    pub fn new(rest: Vec<String>) -> Args {
        Args { rest }
    }

    /// The arguments of a command line written as one string, split at white space (for
    /// tests and examples: no quoting).
    pub fn from_line(line: &str) -> Args {
        Args::new(line.split_whitespace().map(str::to_owned).collect())
    }

    /// The value after `flag`, if `flag` is present; an error if it is the last argument.
    pub fn take(&mut self, flag: &str) -> Result<Option<String>, String> {
        match self.rest.iter().position(|a| a == flag) {
            None => Ok(None),
            Some(i) if i + 1 < self.rest.len() => {
                let v = self.rest.remove(i + 1);
                self.rest.remove(i);
                Ok(Some(v))
            }
            Some(_) => Err(format!("{flag} needs a value")),
        }
    }

    /// Whether `flag` is present, without reading it.
    pub fn has(&self, flag: &str) -> bool {
        self.rest.iter().any(|a| a == flag)
    }

    /// Whether the switch `flag` (no value) is present.
    pub fn switch(&mut self, flag: &str) -> bool {
        let i = self.rest.iter().position(|a| a == flag);
        i.map(|i| self.rest.remove(i)).is_some()
    }

    /// The value after `flag`, parsed.
    pub fn parse<T: FromStr>(&mut self, flag: &str) -> Result<Option<T>, String>
    where
        T::Err: std::fmt::Display,
    {
        self.take(flag)?
            .map(|v| v.parse::<T>().map_err(|e| format!("{flag} {v:?}: {e}")))
            .transpose()
    }

    /// The value after `flag` as a non-negative number of seconds.
    pub fn secs(&mut self, flag: &str) -> Result<Option<Duration>, String> {
        match self.parse::<f64>(flag)? {
            Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(Duration::from_secs_f64(s))),
            Some(s) => Err(format!("{flag} {s}: not a duration")),
            None => Ok(None),
        }
    }

    /// The value after `flag` as a comma-separated list, each element parsed.
    pub fn list<T: FromStr>(&mut self, flag: &str) -> Result<Option<Vec<T>>, String>
    where
        T::Err: std::fmt::Display,
    {
        self.take(flag)?
            .map(|v| {
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| {
                        s.trim()
                            .parse::<T>()
                            .map_err(|e| format!("{flag} {s:?}: {e}"))
                    })
                    .collect()
            })
            .transpose()
    }

    /// Ok when every argument was read; otherwise names the first one left.
    pub fn finish(self) -> Result<(), String> {
        match self.rest.first() {
            None => Ok(()),
            Some(a) => Err(format!("unexpected argument {a:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Args {
        Args::from_line(s)
    }

    #[test]
    fn reads_values_switches_lists_and_seconds() {
        let mut a = args("--rates 1000,2000 --spin --duration 0.5 --mtu 9000");
        assert_eq!(
            a.list::<f64>("--rates").unwrap(),
            Some(vec![1000.0, 2000.0])
        );
        assert!(a.has("--spin"));
        assert!(a.switch("--spin"));
        assert!(!a.switch("--spin"));
        assert_eq!(
            a.secs("--duration").unwrap(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(a.parse::<usize>("--mtu").unwrap(), Some(9000));
        assert_eq!(a.take("--absent").unwrap(), None);
        a.finish().unwrap();
    }

    #[test]
    fn errors_name_the_flag_and_the_value() {
        let mut a = args("--mtu big --duration -1 --rates 1,x --out");
        assert_eq!(
            a.parse::<usize>("--mtu").unwrap_err(),
            "--mtu \"big\": invalid digit found in string"
        );
        assert_eq!(
            a.secs("--duration").unwrap_err(),
            "--duration -1: not a duration"
        );
        assert!(a
            .list::<u32>("--rates")
            .unwrap_err()
            .starts_with("--rates \"x\""));
        assert_eq!(a.take("--out").unwrap_err(), "--out needs a value");
        assert_eq!(a.finish().unwrap_err(), "unexpected argument \"--out\"");
    }
}
