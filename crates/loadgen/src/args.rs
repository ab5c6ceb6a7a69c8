//! The flags of a benchmark command line (`--flag value`, `--switch`, comma lists, seconds),
//! shared by the bench binaries (echo, kv, calibrate, kv-peers, redis-cf-bench, tcp-echo) so
//! each parses them the same way; and the load flags every load-generating command takes
//! ([`LoadFlags`]), read once here so each app adds only its own (a command that honours only
//! some of them refuses the rest with [`LoadFlags::only`]).

use std::path::PathBuf;
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

/// The load flags of every load-generating command (`echo bench|client`, `kv bench|client`,
/// `calibrate run`): what was given of
/// `--rates R,R,.. --duration SECS --warmup SECS --timeout-ms MS --threads N --mtu N --out DIR
/// --spin`. The saturation search's own are [`SearchFlags`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadFlags {
    /// `--rates R,R,..`: offered loads, requests per second.
    pub rates: Option<Vec<f64>>,
    /// `--duration SECS`: measured time per load point.
    pub duration: Option<Duration>,
    /// `--warmup SECS`: warm-up before each measured window.
    pub warmup: Option<Duration>,
    /// `--timeout-ms MS`: a request unanswered this long is lost.
    pub timeout: Option<Duration>,
    /// `--threads N`: client threads (at least 1; 0 reads as 1).
    pub threads: Option<usize>,
    /// `--mtu N`: the socket datapath's IP MTU.
    pub mtu: Option<usize>,
    /// `--out DIR`: where the results go.
    pub out: Option<PathBuf>,
    /// `--spin`: busy-poll instead of blocking or yielding when idle.
    pub spin: bool,
}

/// The flags of the saturation search ([`crate::search`]) of `echo bench`, `kv bench` and
/// `calibrate run`: what was given of `--trials K --resolution F`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SearchFlags {
    /// `--trials K`: trials per load at most (their median decides).
    pub trials: Option<usize>,
    /// `--resolution F`: the search bisects until the saturation bracket is within this
    /// fraction.
    pub resolution: Option<f64>,
}

impl SearchFlags {
    /// Sets `trials` and `resolution` to what was given; leaves the rest.
    pub fn apply(self, trials: &mut usize, resolution: &mut f64) {
        *trials = self.trials.unwrap_or(*trials);
        *resolution = self.resolution.unwrap_or(*resolution);
    }
}

/// The settings of a command's configuration that [`LoadFlags`] change, borrowed (build it
/// with [`load_settings!`](crate::load_settings) from a configuration with fields of these
/// names).
#[derive(Debug)]
pub struct LoadSettings<'a> {
    /// Offered loads.
    pub rates: &'a mut Vec<f64>,
    /// Measured time per load point.
    pub duration: &'a mut Duration,
    /// Warm-up per load point.
    pub warmup: &'a mut Duration,
    /// Loss timeout.
    pub timeout: &'a mut Duration,
    /// Client threads.
    pub threads: &'a mut usize,
    /// IP MTU.
    pub mtu: &'a mut usize,
    /// Output directory.
    pub out_dir: &'a mut PathBuf,
    /// Busy-poll.
    pub spin: &'a mut bool,
}

/// [`LoadSettings`] of a configuration whose fields are named `rates`, `duration`, `warmup`,
/// `timeout`, `threads`, `mtu`, `out_dir` and `spin`.
#[macro_export]
macro_rules! load_settings {
    ($cfg:expr) => {
        $crate::args::LoadSettings {
            rates: &mut $cfg.rates,
            duration: &mut $cfg.duration,
            warmup: &mut $cfg.warmup,
            timeout: &mut $cfg.timeout,
            threads: &mut $cfg.threads,
            mtu: &mut $cfg.mtu,
            out_dir: &mut $cfg.out_dir,
            spin: &mut $cfg.spin,
        }
    };
}

impl LoadFlags {
    /// The flags given, by name (`--rates`, …), in the order of the fields.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--rates", self.rates.is_some()),
            ("--duration", self.duration.is_some()),
            ("--warmup", self.warmup.is_some()),
            ("--timeout-ms", self.timeout.is_some()),
            ("--threads", self.threads.is_some()),
            ("--mtu", self.mtu.is_some()),
            ("--out", self.out.is_some()),
            ("--spin", self.spin),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    /// These flags, when the command `cmd` honours every one given (`takes` names those it
    /// honours); else an error naming the first it does not, so that a command running only
    /// part of the load (kernel TCP has no MTU to set, say) accepts nothing silently.
    pub fn only(self, cmd: &str, takes: &[&str]) -> Result<LoadFlags, String> {
        match self.given().into_iter().find(|f| !takes.contains(f)) {
            Some(f) => Err(format!(
                "{cmd} does not take {f} (its load flags are {})",
                takes.join(" ")
            )),
            None => Ok(self),
        }
    }

    /// Sets in `s` what was given (`--spin` only turns spinning on); leaves the rest.
    pub fn apply(&self, s: LoadSettings<'_>) {
        if let Some(r) = &self.rates {
            s.rates.clone_from(r);
        }
        if let Some(d) = self.duration {
            *s.duration = d;
        }
        if let Some(d) = self.warmup {
            *s.warmup = d;
        }
        if let Some(t) = self.timeout {
            *s.timeout = t;
        }
        if let Some(t) = self.threads {
            *s.threads = t;
        }
        if let Some(m) = self.mtu {
            *s.mtu = m;
        }
        if let Some(o) = &self.out {
            s.out_dir.clone_from(o);
        }
        if self.spin {
            *s.spin = true;
        }
    }
}

impl Args {
    /// Reads the load flags ([`LoadFlags`]).
    pub fn load_flags(&mut self) -> Result<LoadFlags, String> {
        Ok(LoadFlags {
            rates: self.list::<f64>("--rates")?,
            duration: self.secs("--duration")?,
            warmup: self.secs("--warmup")?,
            timeout: self
                .parse::<u64>("--timeout-ms")?
                .map(Duration::from_millis),
            threads: self.parse::<usize>("--threads")?.map(|t| t.max(1)),
            mtu: self.parse::<usize>("--mtu")?,
            out: self.take("--out")?.map(PathBuf::from),
            spin: self.switch("--spin"),
        })
    }

    /// Reads the saturation search's flags ([`SearchFlags`]).
    pub fn search_flags(&mut self) -> Result<SearchFlags, String> {
        Ok(SearchFlags {
            trials: self.parse::<usize>("--trials")?,
            resolution: self.parse::<f64>("--resolution")?,
        })
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

    #[derive(Debug, Default)]
    struct Cfg {
        rates: Vec<f64>,
        duration: Duration,
        warmup: Duration,
        timeout: Duration,
        threads: usize,
        mtu: usize,
        out_dir: PathBuf,
        spin: bool,
        other: u8,
    }

    #[test]
    fn only_refuses_a_load_flag_the_command_does_not_honour() {
        let takes = ["--rates", "--duration", "--out"];
        let f = args("--rates 1,2 --out o").load_flags().unwrap();
        assert_eq!(f.clone().only("tcp-thing", &takes), Ok(f));
        assert_eq!(
            args("--rates 1 --mtu 9000 --spin")
                .load_flags()
                .unwrap()
                .only("tcp-thing", &takes)
                .unwrap_err(),
            "tcp-thing does not take --mtu (its load flags are --rates --duration --out)"
        );
        assert!(args("--spin")
            .load_flags()
            .unwrap()
            .only("tcp-thing", &takes)
            .unwrap_err()
            .contains("does not take --spin"));
    }

    #[test]
    fn load_flags_set_what_was_given() {
        let mut a = args(
            "--rates 2,1 --duration 0.5 --warmup 1 --timeout-ms 20 --threads 0 --mtu 9000 \
             --out o --spin --trials 4 --resolution 0.1 --other 3",
        );
        let f = a.load_flags().unwrap();
        let search = a.search_flags().unwrap();
        assert_eq!(a.parse::<u8>("--other").unwrap(), Some(3));
        a.finish().unwrap();
        let (mut trials, mut resolution) = (3, 0.05);
        search.apply(&mut trials, &mut resolution);
        assert_eq!((trials, resolution), (4, 0.1));
        let mut c = Cfg::default();
        f.apply(crate::load_settings!(c));
        assert_eq!(c.rates, vec![2.0, 1.0]);
        assert_eq!(
            (c.duration, c.warmup, c.timeout),
            (
                Duration::from_millis(500),
                Duration::from_secs(1),
                Duration::from_millis(20)
            )
        );
        assert_eq!((c.threads, c.mtu, c.spin, c.other), (1, 9000, true, 0));
        assert_eq!(c.out_dir, PathBuf::from("o"));

        // Nothing given: nothing changes, and the search's flags stay unread.
        let mut a = args("--trials 4");
        let f = a.load_flags().unwrap();
        assert_eq!(f, LoadFlags::default());
        let mut c = Cfg {
            threads: 3,
            spin: true,
            ..Cfg::default()
        };
        f.apply(crate::load_settings!(c));
        assert_eq!((c.threads, c.spin), (3, true));
        assert_eq!(a.finish().unwrap_err(), "unexpected argument \"--trials\"");
        assert_eq!(
            args("--spin --rates 1 --mtu 1500")
                .load_flags()
                .unwrap()
                .given(),
            ["--rates", "--mtu", "--spin"]
        );
        assert_eq!(
            args("--timeout-ms -3").load_flags().unwrap_err(),
            "--timeout-ms \"-3\": invalid digit found in string"
        );
    }
}
