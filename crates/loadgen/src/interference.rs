//! What else ran on a benchmark's CPUs while it measured: the time other processes (and the
//! kernel on their behalf) spent on those CPUs, from `/proc/stat`, and the involuntary context
//! switches of this process's threads, from `/proc/self/task/*/status`. A trial whose CPUs
//! were shared is **disturbed**: its throughput says as much about the neighbour as about the
//! code measured. [`idle_warning`] says at start when the machine is not idle.
//!
//! Linux only; elsewhere (or without `/proc`) every reading is `None` and nothing is flagged.

use std::time::{Duration, Instant};

/// Other processes' share of the benchmark CPUs' time above which a trial is disturbed.
pub const DISTURBED_SHARE: f64 = 0.03;

/// A reading of the benchmark CPUs' and this process's time, to subtract from a later one.
#[derive(Clone, Debug)]
pub struct CpuSnapshot {
    at: Instant,
    cpus: Vec<usize>,
    /// Busy clock ticks (everything but idle and iowait) of each CPU of `cpus`.
    busy_ticks: Vec<u64>,
    /// This process's user + system ticks (all threads).
    own_ticks: u64,
    /// Involuntary context switches of this process's threads.
    involuntary: u64,
}

/// What happened on the benchmark CPUs between two snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct Interference {
    /// Length of the interval.
    pub window: Duration,
    /// CPUs watched.
    pub cpus: usize,
    /// Time the watched CPUs were busy, in all, seconds.
    pub busy_s: f64,
    /// Time other processes (and interrupts) used on them: busy time minus this process's
    /// own CPU time (all its threads, wherever they ran, so an estimate from below), seconds.
    pub others_s: f64,
    /// Involuntary context switches of this process's threads: a pinned, spinning thread
    /// switched out involuntarily was displaced by something else.
    pub involuntary_switches: u64,
}

impl Interference {
    /// Other processes' share of the watched CPUs' time (0–1).
    pub fn others_share(&self) -> f64 {
        let total = self.window.as_secs_f64() * self.cpus as f64;
        if total <= 0.0 {
            0.0
        } else {
            (self.others_s / total).clamp(0.0, 1.0)
        }
    }

    /// Whether the trial is disturbed: other processes took more than [`DISTURBED_SHARE`] of
    /// the watched CPUs. The involuntary switches are reported, not judged: on an idle 2-CPU
    /// machine a bench's own threads (server, device, the main thread waking to watch) switch
    /// each other out 20-240 times per trial, so a count says nothing about a neighbour by
    /// itself (a first version flagged every trial of a quiet run that way).
    pub fn disturbed(&self) -> bool {
        self.others_share() > DISTURBED_SHARE
    }

    /// One phrase for a progress line or a table note.
    pub fn describe(&self) -> String {
        format!(
            "others used {:.1}% of the {} bench CPU(s), {} involuntary switches of its threads{}",
            self.others_share() * 100.0,
            self.cpus,
            self.involuntary_switches,
            if self.disturbed() { ": DISTURBED" } else { "" }
        )
    }
}

fn ticks_per_second() -> f64 {
    // USER_HZ is 100 on every Linux architecture /proc reports in.
    100.0
}

/// Busy ticks per CPU from `/proc/stat` (`cpuN user nice system idle iowait irq softirq steal`).
fn cpu_busy_ticks() -> Option<Vec<(usize, u64)>> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut out = Vec::new();
    for line in text.lines() {
        // `cpuN ...`; the aggregate line is `cpu  ...` (no number right after "cpu").
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut f = rest.split_whitespace();
        let Some(Ok(cpu)) = f.next().map(str::parse::<usize>) else {
            continue;
        };
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            return None;
        }
        // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
        out.push((cpu, v[0] + v[1] + v[2] + v[5] + v[6] + v[7]));
    }
    Some(out)
}

/// This process's user + system ticks (`/proc/self/stat` fields 14 and 15).
fn own_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last ')'.
    let after = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state): utime is field 14, stime 15.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Involuntary context switches summed over this process's threads.
fn involuntary_switches() -> Option<u64> {
    let mut n = 0;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(t) = t else { continue };
        let Ok(s) = std::fs::read_to_string(t.path().join("status")) else {
            continue; // a thread that just ended
        };
        n += s
            .lines()
            .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(n)
}

impl CpuSnapshot {
    /// Reads the busy time of `cpus` and this process's CPU time and switches now; `None`
    /// where `/proc` cannot tell.
    pub fn take(cpus: &[usize]) -> Option<CpuSnapshot> {
        let all = cpu_busy_ticks()?;
        let busy_ticks = cpus
            .iter()
            .map(|c| all.iter().find(|(k, _)| k == c).map(|&(_, t)| t))
            .collect::<Option<Vec<u64>>>()?;
        Some(CpuSnapshot {
            at: Instant::now(),
            cpus: cpus.to_vec(),
            busy_ticks,
            own_ticks: own_ticks()?,
            involuntary: involuntary_switches()?,
        })
    }

    /// What happened on the same CPUs since `self` (a later reading minus this one).
    pub fn since(&self) -> Option<Interference> {
        let now = CpuSnapshot::take(&self.cpus)?;
        let hz = ticks_per_second();
        let busy: u64 = now
            .busy_ticks
            .iter()
            .zip(&self.busy_ticks)
            .map(|(a, b)| a.saturating_sub(*b))
            .sum();
        let own = now.own_ticks.saturating_sub(self.own_ticks);
        Some(Interference {
            window: now.at - self.at,
            cpus: self.cpus.len(),
            busy_s: busy as f64 / hz,
            others_s: busy.saturating_sub(own) as f64 / hz,
            involuntary_switches: now.involuntary.saturating_sub(self.involuntary),
        })
    }
}

/// The calling thread's time on its CPU and runnable but waiting for it (the scheduler's
/// run-queue delay), nanoseconds, from `/proc/thread-self/schedstat`. Two readings taken by
/// the same thread around a trial say whether a spinning server thread had its CPU: waiting
/// time is time another task held it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSched {
    /// Time running.
    pub on_cpu_ns: u64,
    /// Time runnable, waiting for the CPU.
    pub waited_ns: u64,
}

impl ThreadSched {
    /// The calling thread's reading now; `None` where `/proc` cannot tell (no schedstats).
    pub fn now() -> Option<ThreadSched> {
        Self::parse(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
    }

    /// `schedstat`'s text: running and waiting nanoseconds, then the timeslices.
    fn parse(text: &str) -> Option<ThreadSched> {
        let mut f = text.split_whitespace().map(str::parse::<u64>);
        Some(ThreadSched {
            on_cpu_ns: f.next()?.ok()?,
            waited_ns: f.next()?.ok()?,
        })
    }

    /// What the thread did since `earlier` (a reading of the same thread).
    pub fn since(&self, earlier: &ThreadSched) -> ThreadSched {
        ThreadSched {
            on_cpu_ns: self.on_cpu_ns.saturating_sub(earlier.on_cpu_ns),
            waited_ns: self.waited_ns.saturating_sub(earlier.waited_ns),
        }
    }
}

/// Watches every CPU for `probe` while this process does nothing, and returns a one-line
/// warning when other processes kept them more than 10 % busy (`None` when idle, or when
/// `/proc` cannot tell).
pub fn idle_warning(probe: Duration) -> Option<String> {
    let cpus: Vec<usize> = cpu_busy_ticks()?.into_iter().map(|(c, _)| c).collect();
    let before = CpuSnapshot::take(&cpus)?;
    std::thread::sleep(probe);
    let i = before.since()?;
    let share = i.others_share();
    (share > 0.10).then(|| {
        format!(
            "WARNING: the machine is not idle: other processes used {:.0}% of its {} CPUs over \
             {:?} before the run; trials they disturb are marked, and their numbers mean less",
            share * 100.0,
            i.cpus,
            probe
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_schedstat_reads_as_running_and_waiting_time() {
        assert_eq!(
            ThreadSched::parse("123456 7890 42\n"),
            Some(ThreadSched {
                on_cpu_ns: 123456,
                waited_ns: 7890
            })
        );
        assert_eq!(ThreadSched::parse("12 x 3"), None);
        assert_eq!(ThreadSched::parse(""), None);
        let Some(before) = ThreadSched::now() else {
            return; // no schedstats here: nothing to read
        };
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let d = ThreadSched::now().unwrap().since(&before);
        // 50 ms of wall time spent running or waiting to run (the kernel counts in ticks or
        // finer: at least half of it must show).
        assert!(d.on_cpu_ns + d.waited_ns >= 25_000_000, "{d:?}");
        assert_eq!(before.since(&ThreadSched::now().unwrap()).on_cpu_ns, 0);
    }

    #[test]
    fn a_busy_thread_of_our_own_is_not_interference() {
        let Some(cpus) =
            cpu_busy_ticks().map(|v| v.into_iter().map(|(c, _)| c).collect::<Vec<_>>())
        else {
            return; // no /proc here: nothing to read, nothing flagged
        };
        let before = CpuSnapshot::take(&cpus).expect("readable");
        // Our own work: counted as ours, not as others'.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let i = before.since().expect("readable");
        assert_eq!(i.cpus, cpus.len());
        assert!(i.window >= Duration::from_millis(300));
        assert!(i.busy_s >= i.others_s);
        assert!((0.0..=1.0).contains(&i.others_share()));
        assert!(
            i.describe().contains("involuntary switches"),
            "{}",
            i.describe()
        );
    }

    #[test]
    fn the_disturbed_flag_follows_the_share_of_other_processes() {
        let quiet = Interference {
            window: Duration::from_secs(1),
            cpus: 2,
            busy_s: 2.0,
            others_s: 0.02,
            involuntary_switches: 3,
        };
        assert!(!quiet.disturbed());
        assert!((quiet.others_share() - 0.01).abs() < 1e-9);
        let shared = Interference {
            others_s: 0.5,
            ..quiet.clone()
        };
        assert!(shared.disturbed() && shared.describe().ends_with("DISTURBED"));
        // The bench's own threads displacing each other is not a neighbour.
        let switched = Interference {
            involuntary_switches: 500,
            ..quiet
        };
        assert!(!switched.disturbed() && switched.describe().contains("500 involuntary"));
    }
}
