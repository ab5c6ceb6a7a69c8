//! The load flags every load-generating command takes ([`LoadFlags`]), the settings they set
//! ([`LoadConfig`], one per command's configuration) and the saturation search's flags
//! ([`SearchFlags`]), read once here from a command line ([`cli_args::Args`]) so each app adds
//! only its own (a command that honours only some of them refuses the rest with
//! [`LoadFlags::only`]).

use std::path::PathBuf;
use std::time::Duration;

use cli_args::Args;

use crate::{RunConfig, Schedule};

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
    /// Reads `--trials` and `--resolution` from `a`.
    pub fn from_args(a: &mut Args) -> Result<SearchFlags, String> {
        Ok(SearchFlags {
            trials: a.parse::<usize>("--trials")?,
            resolution: a.parse::<f64>("--resolution")?,
        })
    }

    /// Sets `trials` and `resolution` to what was given; leaves the rest.
    pub fn apply(self, trials: &mut usize, resolution: &mut f64) {
        *trials = self.trials.unwrap_or(*trials);
        *resolution = self.resolution.unwrap_or(*resolution);
    }
}

/// The settings every load-generating command shares, embedded in its configuration (`echo
/// bench`'s and `kv bench`'s `BenchConfig`, `calibrate run`'s): what [`LoadFlags`] set, with
/// each command's defaults underneath.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadConfig {
    /// Offered loads, requests per second (a sweep's points or a search's coarse grid).
    pub rates: Vec<f64>,
    /// Measured time per load point.
    pub duration: Duration,
    /// Warm-up before each measured window (verified, not measured).
    pub warmup: Duration,
    /// A request unanswered this long is lost.
    pub timeout: Duration,
    /// Client threads.
    pub threads: usize,
    /// IP MTU of the datapath.
    pub mtu: usize,
    /// Busy-poll: the server never blocks and the clients never yield (the paper's setup; on
    /// a shared machine it mostly measures the scheduler).
    pub spin: bool,
    /// Where the JSON, plots and tables go.
    pub out_dir: PathBuf,
}

impl LoadConfig {
    /// The benches' defaults for offered loads `rates`, IP MTU `mtu` and output directory
    /// `out_dir`: 500 ms measured per load point after 100 ms of warm-up, a request lost after
    /// 200 ms, one client thread, no busy-polling.
    pub fn new(rates: Vec<f64>, mtu: usize, out_dir: impl Into<PathBuf>) -> LoadConfig {
        LoadConfig {
            rates,
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            timeout: Duration::from_millis(200),
            threads: 1,
            mtu,
            spin: false,
            out_dir: out_dir.into(),
        }
    }

    /// The loads to run: `rates` and `also`, ascending, without duplicates and without the
    /// non-positive or non-finite.
    pub fn loads(&self, also: &[f64]) -> Vec<f64> {
        let mut v: Vec<f64> = self.rates.iter().chain(also).copied().collect();
        v.retain(|r| r.is_finite() && *r > 0.0);
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }

    /// How each load point runs: warm-up, loss timeout and busy-polling, no progress lines.
    pub fn run_config(&self) -> RunConfig {
        RunConfig::quiet(self.warmup, self.timeout, self.spin)
    }

    /// One load point's schedule: Poisson arrivals at `rate` req/s for the warm-up and the
    /// measured time, over the client threads, seeded with `seed`
    /// ([`Schedule::poisson_point`]).
    pub fn schedule(&self, rate: f64, seed: u64) -> Result<Schedule, String> {
        Schedule::poisson_point(rate, self.warmup, self.duration, self.threads, seed)
    }
}

impl LoadFlags {
    /// Reads the load flags from `a`.
    pub fn from_args(a: &mut Args) -> Result<LoadFlags, String> {
        Ok(LoadFlags {
            rates: a.list::<f64>("--rates")?,
            duration: a.secs("--duration")?,
            warmup: a.secs("--warmup")?,
            timeout: a.parse::<u64>("--timeout-ms")?.map(Duration::from_millis),
            threads: a.parse::<usize>("--threads")?.map(|t| t.max(1)),
            mtu: a.parse::<usize>("--mtu")?,
            out: a.take("--out")?.map(PathBuf::from),
            spin: a.switch("--spin"),
        })
    }

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
    pub fn apply(&self, s: &mut LoadConfig) {
        if let Some(r) = &self.rates {
            s.rates.clone_from(r);
        }
        if let Some(d) = self.duration {
            s.duration = d;
        }
        if let Some(d) = self.warmup {
            s.warmup = d;
        }
        if let Some(t) = self.timeout {
            s.timeout = t;
        }
        if let Some(t) = self.threads {
            s.threads = t;
        }
        if let Some(m) = self.mtu {
            s.mtu = m;
        }
        if let Some(o) = &self.out {
            s.out_dir.clone_from(o);
        }
        if self.spin {
            s.spin = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Args {
        Args::from_line(s)
    }

    fn load(s: &str) -> Result<LoadFlags, String> {
        LoadFlags::from_args(&mut args(s))
    }

    fn cfg() -> LoadConfig {
        LoadConfig::new(vec![7.0], 1500, "d")
    }

    #[test]
    fn new_gives_the_benches_defaults() {
        let c = cfg();
        assert_eq!(
            (c.duration, c.warmup, c.timeout, c.threads, c.spin),
            (
                Duration::from_millis(500),
                Duration::from_millis(100),
                Duration::from_millis(200),
                1,
                false
            )
        );
        assert_eq!(
            (c.rates, c.mtu, c.out_dir),
            (vec![7.0], 1500, PathBuf::from("d"))
        );
    }

    #[test]
    fn loads_are_sorted_unique_and_positive() {
        let c = LoadConfig::new(vec![30.0, 10.0, 30.0, -1.0, f64::NAN, 0.0], 1500, "d");
        assert_eq!(c.loads(&[]), [10.0, 30.0]);
        assert_eq!(c.loads(&[5.0, 10.0, f64::INFINITY]), [5.0, 10.0, 30.0]);
    }

    #[test]
    fn a_point_runs_with_the_configured_timing() {
        let c = LoadConfig {
            warmup: Duration::from_millis(30),
            duration: Duration::from_millis(70),
            timeout: Duration::from_millis(9),
            threads: 3,
            spin: true,
            ..cfg()
        };
        let r = c.run_config();
        assert_eq!(
            (r.warmup, r.timeout, r.busy_poll, r.progress),
            (
                Duration::from_millis(30),
                Duration::from_millis(9),
                true,
                false
            )
        );
        let s = c.schedule(10_000.0, 4).unwrap();
        assert_eq!(s.threads().len(), 3);
        // 10 k req/s for 100 ms: about a thousand requests.
        let n = s.total_requests();
        assert!((800..1200).contains(&n), "{n}");
        assert!(c
            .schedule(-1.0, 4)
            .unwrap_err()
            .starts_with("schedule at -1 req/s"));
    }

    #[test]
    fn only_refuses_a_load_flag_the_command_does_not_honour() {
        let takes = ["--rates", "--duration", "--out"];
        let f = load("--rates 1,2 --out o").unwrap();
        assert_eq!(f.clone().only("tcp-thing", &takes), Ok(f));
        assert_eq!(
            load("--rates 1 --mtu 9000 --spin")
                .unwrap()
                .only("tcp-thing", &takes)
                .unwrap_err(),
            "tcp-thing does not take --mtu (its load flags are --rates --duration --out)"
        );
        assert!(load("--spin")
            .unwrap()
            .only("tcp-thing", &takes)
            .unwrap_err()
            .contains("does not take --spin"));
    }

    #[test]
    fn load_flags_set_what_was_given() {
        let mut a = args(
            "--rates 2,1 --duration 0.25 --warmup 1 --timeout-ms 20 --threads 0 --mtu 9000 \
             --out o --spin --trials 4 --resolution 0.1 --other 3",
        );
        let f = LoadFlags::from_args(&mut a).unwrap();
        let search = SearchFlags::from_args(&mut a).unwrap();
        assert_eq!(a.parse::<u8>("--other").unwrap(), Some(3));
        a.finish().unwrap();
        let (mut trials, mut resolution) = (3, 0.05);
        search.apply(&mut trials, &mut resolution);
        assert_eq!((trials, resolution), (4, 0.1));
        let mut c = cfg();
        f.apply(&mut c);
        assert_eq!(c.rates, vec![2.0, 1.0]);
        assert_eq!(
            (c.duration, c.warmup, c.timeout),
            (
                Duration::from_millis(250),
                Duration::from_secs(1),
                Duration::from_millis(20)
            )
        );
        assert_eq!((c.threads, c.mtu, c.spin), (1, 9000, true));
        assert_eq!(c.out_dir, PathBuf::from("o"));

        // Nothing given: nothing changes, and the search's flags stay unread.
        let mut a = args("--trials 4");
        let f = LoadFlags::from_args(&mut a).unwrap();
        assert_eq!(f, LoadFlags::default());
        let mut c = LoadConfig {
            threads: 3,
            spin: true,
            ..cfg()
        };
        let before = c.clone();
        f.apply(&mut c);
        assert_eq!(c, before);
        assert_eq!(a.finish().unwrap_err(), "unexpected argument \"--trials\"");
        assert_eq!(
            load("--spin --rates 1 --mtu 1500").unwrap().given(),
            ["--rates", "--mtu", "--spin"]
        );
        assert_eq!(
            load("--timeout-ms -3").unwrap_err(),
            "--timeout-ms \"-3\": invalid digit found in string"
        );
    }
}
