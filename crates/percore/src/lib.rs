//! Running a server on N share-nothing cores (`docs/cores.md`).
//!
//! A [`Cores`] is N threads, one per core. Thread *i* is pinned to the *i*-th CPU this process
//! may run on, then runs the app's per-core closure, which builds everything that core uses
//! itself — its datapath (a socket, a NIC queue pair, an AF_XDP socket), pinned memory,
//! connection table, arena, store — says it is [`Ready`], serves until the stop flag is set
//! and returns its own counters. The runtime's buffers are per-core (`!Send`), so they are
//! created on the thread that uses them and never leave it. The only thing the cores share is
//! the stop flag, read once per poll-loop iteration: no locks and no shared counters on the hot
//! path. The counters come back per core from [`Cores::stop`]; reports sum them.
//!
//! [`poll_loop`] is the one poll / idle / report loop of every server ([`Poll`]);
//! [`TimeSplit`] is where such a loop's time went (receive, handler, send, flush and reap,
//! idle), which a server times per burst.

#![deny(unsafe_code)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod time_split;

pub use time_split::{now_ns, Part, TimeSplit};

/// The CPUs this process may run on (its affinity mask), ascending.
#[allow(unsafe_code)]
pub fn allowed_cores() -> io::Result<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain data; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; `set` is a valid, writable cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` < CPU_SETSIZE, inside the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to CPU `core`.
pub fn pin_current_thread(core: usize) -> io::Result<()> {
    set_current_thread_cpus(&[core])
        .map_err(|e| io::Error::other(format!("pinning a thread to CPU {core}: {e}")))
}

/// Lets the calling thread run on exactly `cores` (e.g. the CPUs a process was allowed before
/// one of its threads was pinned, for a thread that starts threads pinned elsewhere: threads
/// inherit their creator's mask).
#[allow(unsafe_code)]
pub fn set_current_thread_cpus(cores: &[usize]) -> io::Result<()> {
    // SAFETY: as in `allowed_cores`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in cores {
        if core >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!("CPU {core} out of range")));
        }
        // SAFETY: `core` < CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    // SAFETY: pid 0 is this thread; `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs for `n` server cores: the first `n` this process may run on, or a clear error
/// when there are fewer (two server cores on one CPU would take turns, and a scaling
/// measurement would measure the scheduler).
pub fn cpus_for(n: usize) -> Result<Vec<usize>, String> {
    if n == 0 {
        return Err("--cores must be at least 1".to_owned());
    }
    let allowed =
        allowed_cores().map_err(|e| format!("reading this process's CPU affinity: {e}"))?;
    if n > allowed.len() {
        return Err(format!(
            "{n} server cores asked for, but this process may only run on {} CPU(s) {:?}; \
             use --cores {} or fewer, or run on a machine (or cgroup/taskset) with more CPUs",
            allowed.len(),
            allowed,
            allowed.len()
        ));
    }
    Ok(allowed[..n].to_vec())
}

/// A server the [`poll_loop`] drives.
pub trait Poll {
    /// The counters a core returns when it stops.
    type Stats: Send + 'static;
    /// Counters so far.
    fn stats(&self) -> Self::Stats;
    /// Receives one burst, answers it, flushes. Returns the messages received; never blocks.
    fn poll(&mut self) -> usize;
    /// The line printed (on stderr) every report interval.
    fn report_line(&self) -> String;
}

/// Counters that N cores return separately and a report sums.
pub trait CoreStats: fmt::Display + Send + 'static {
    /// The counters of several cores, summed.
    fn sum(per_core: &[Self]) -> Self
    where
        Self: Sized;
}

/// Polls `server` until `stop` is set. After `idle_after` empty polls in a row calls `idle`
/// (which may block briefly, e.g. until a socket is readable) so an idle server leaves the CPU
/// to threads it shares cores with. With `report`, prints [`Poll::report_line`] on stderr that
/// often.
pub fn poll_loop<S: Poll + ?Sized>(
    server: &mut S,
    stop: &AtomicBool,
    report: Option<Duration>,
    idle_after: u32,
    idle: &mut dyn FnMut(&mut S),
) {
    let (mut empty, mut iter, mut last) = (0u32, 0u32, Instant::now());
    while !stop.load(Ordering::Relaxed) {
        if server.poll() == 0 {
            empty += 1;
            if empty >= idle_after {
                idle(server);
                empty = 0;
            }
        } else {
            empty = 0;
        }
        iter = iter.wrapping_add(1);
        if let Some(every) = report {
            if iter.is_multiple_of(1024) && last.elapsed() >= every {
                last = Instant::now();
                eprintln!("{}", server.report_line());
            }
        }
    }
}

/// How to start the cores.
#[derive(Clone, Debug)]
pub struct CoresConfig {
    /// Server cores (threads).
    pub cores: usize,
    /// Pin thread *i* to the *i*-th allowed CPU. Off, the threads float (the single-core
    /// benchmarks that share two CPUs with their client threads); N must still not exceed the
    /// CPUs.
    pub pin: bool,
    /// Thread names are `{name}-{i}`.
    pub name: String,
    /// The CPUs chosen beforehand ([`Self::on_cpus`]); by default the first N this process
    /// may run on when the cores are spawned.
    cpus: Option<Vec<usize>>,
}

impl CoresConfig {
    /// `cores` pinned threads named `name-i`.
    pub fn new(name: &str, cores: usize) -> CoresConfig {
        CoresConfig {
            cores,
            pin: true,
            name: name.to_owned(),
            cpus: None,
        }
    }

    /// Runs core *i* on `cpus[i]` ([`cpus_for`] taken earlier) instead of the first N CPUs
    /// the spawning thread may run on when it spawns: for a caller whose own affinity narrows
    /// in between (DPDK's EAL pins the thread that starts it to its main lcore, and threads
    /// it then spawns inherit that).
    pub fn on_cpus(mut self, cpus: Vec<usize>) -> CoresConfig {
        self.cpus = Some(cpus);
        self
    }
}

/// What one core's thread is given.
#[derive(Debug)]
pub struct Core {
    index: usize,
    cores: usize,
    cpu: Option<usize>,
    stop: Arc<AtomicBool>,
}

impl Core {
    /// This core's index, 0..N.
    pub fn index(&self) -> usize {
        self.index
    }

    /// N, the number of server cores.
    pub fn count(&self) -> usize {
        self.cores
    }

    /// The CPU this thread is pinned to, if pinned.
    pub fn cpu(&self) -> Option<usize> {
        self.cpu
    }

    /// The flag that ends the core's poll loop.
    pub fn stop(&self) -> &AtomicBool {
        &self.stop
    }
}

enum Event<R> {
    Ready(usize, R),
    Ended(usize, String),
}

/// Tells the spawner that a core is set up (bound, loaded) and what it wants to report
/// (e.g. its address). Each core calls [`Ready::ready`] once, before serving.
pub struct Ready<R> {
    index: usize,
    tx: mpsc::Sender<Event<R>>,
}

impl<R> Ready<R> {
    /// This core is serving; `info` is handed to whoever spawned the cores.
    pub fn ready(self, info: R) {
        let _ = self.tx.send(Event::Ready(self.index, info));
    }
}

impl<R> fmt::Debug for Ready<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ready").field("index", &self.index).finish()
    }
}

/// What a server core that owns a queue of a device (a NIC queue pair, an AF_XDP socket)
/// reports when ready: the address it answers at and a description of its queue (e.g.
/// `ConnectX mlx5_0, queue set 1`), for the server's ready line. The NIC crates' per-core
/// spawners (`datapath_mlx5::hw::spawn_server_cores`, `datapath_ice::spawn::spawn_cores`)
/// hand it to each core; the core reports it with [`Ready::ready`] once set up.
pub type QueueInfo = (std::net::SocketAddrV4, String);

/// N server cores, running.
pub struct Cores<R, S> {
    ready: Vec<R>,
    stop: Arc<AtomicBool>,
    joins: Vec<JoinHandle<Result<S, String>>>,
}

impl<R: Send + 'static, S: Send + 'static> Cores<R, S> {
    /// Starts `cfg.cores` threads, each running `body` with its [`Core`] and a [`Ready`] to
    /// call once set up, and returns when every core is ready. When any core fails to set up
    /// (`body` returns an error, or ends, before calling `ready`), stops the others and returns
    /// that error.
    pub fn spawn<F>(cfg: &CoresConfig, body: F) -> Result<Self, String>
    where
        F: Fn(Core, Ready<R>) -> Result<S, String> + Send + Sync + 'static,
    {
        Self::spawn_with_stop(cfg, Arc::new(AtomicBool::new(false)), body)
    }

    /// [`Self::spawn`] with a stop flag the caller also holds (e.g. set by a timer).
    pub fn spawn_with_stop<F>(
        cfg: &CoresConfig,
        stop: Arc<AtomicBool>,
        body: F,
    ) -> Result<Self, String>
    where
        F: Fn(Core, Ready<R>) -> Result<S, String> + Send + Sync + 'static,
    {
        let cpus = match &cfg.cpus {
            None => cpus_for(cfg.cores)?,
            Some(c) if c.len() >= cfg.cores && cfg.cores > 0 => c[..cfg.cores].to_vec(),
            Some(c) => {
                return Err(format!(
                    "{} server cores asked for, but only CPUs {c:?} were given",
                    cfg.cores
                ))
            }
        };
        let body = Arc::new(body);
        let (tx, rx) = mpsc::channel();
        let mut joins = Vec::with_capacity(cfg.cores);
        let mut failed = None;
        for (index, &cpu) in cpus.iter().enumerate() {
            let core = Core {
                index,
                cores: cfg.cores,
                cpu: cfg.pin.then_some(cpu),
                stop: stop.clone(),
            };
            let (tx, body) = (tx.clone(), body.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{index}", cfg.name))
                .spawn(move || {
                    if let Some(cpu) = core.cpu {
                        if let Err(e) = pin_current_thread(cpu) {
                            let e = e.to_string();
                            let _ = tx.send(Event::Ended(index, e.clone()));
                            return Err(e);
                        }
                    }
                    let ready = Ready {
                        index,
                        tx: tx.clone(),
                    };
                    let r = body(core, ready);
                    let why = match &r {
                        Ok(_) => "ended before it was ready".to_owned(),
                        Err(e) => e.clone(),
                    };
                    // Ignored by the spawner when the core was ready already.
                    let _ = tx.send(Event::Ended(index, why));
                    r
                });
            match spawned {
                Ok(j) => joins.push(j),
                Err(e) => {
                    failed = Some(format!("starting server core {index}: {e}"));
                    break;
                }
            }
        }
        drop(tx);
        let mut ready: Vec<Option<R>> = (0..joins.len()).map(|_| None).collect();
        let mut waiting = joins.len();
        while failed.is_none() && waiting > 0 {
            match rx.recv() {
                Ok(Event::Ready(i, r)) if ready[i].is_none() => {
                    ready[i] = Some(r);
                    waiting -= 1;
                }
                Ok(Event::Ended(i, why)) if ready[i].is_none() => {
                    failed = Some(format!("server core {i}: {why}"));
                }
                Ok(_) => {}
                Err(_) => failed = Some("the server cores exited during setup".to_owned()),
            }
        }
        if let Some(e) = failed {
            stop.store(true, Ordering::Relaxed);
            for j in joins {
                let _ = j.join();
            }
            return Err(e);
        }
        Ok(Cores {
            ready: ready.into_iter().map(|r| r.expect("all ready")).collect(),
            stop,
            joins,
        })
    }

    /// What each core reported when ready, by core index.
    pub fn ready(&self) -> &[R] {
        &self.ready
    }

    /// Number of cores.
    pub fn len(&self) -> usize {
        self.joins.len()
    }

    /// Always false: there is at least one core.
    pub fn is_empty(&self) -> bool {
        self.joins.is_empty()
    }

    /// The stop flag the cores poll.
    pub fn stop_flag(&self) -> &Arc<AtomicBool> {
        &self.stop
    }

    /// Stops every core and returns their counters, by core index.
    pub fn stop(self) -> Result<Vec<S>, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits for the cores to end (when someone else sets the stop flag) and returns their
    /// counters, by core index. The first core that failed or panicked makes it an error.
    pub fn join(self) -> Result<Vec<S>, String> {
        let mut out = Vec::with_capacity(self.joins.len());
        let mut err = None;
        for (i, j) in self.joins.into_iter().enumerate() {
            match j.join() {
                Ok(Ok(s)) => out.push(s),
                Ok(Err(e)) => {
                    err.get_or_insert(format!("server core {i}: {e}"));
                }
                Err(_) => {
                    err.get_or_insert(format!("server core {i} panicked"));
                }
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

impl<R: Send + 'static, S: Send + 'static> Cores<R, S> {
    /// Waits until `stop` is set (checked every 20 ms; e.g. by a timer or when stdin closes),
    /// then stops the cores and returns their counters. With more than one core, prints each
    /// core's counters on stderr as `{label} core i: ...`.
    pub fn serve_until(self, stop: &AtomicBool, label: &str) -> Result<Vec<S>, String>
    where
        S: fmt::Display,
    {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let per_core = self.stop()?;
        if per_core.len() > 1 {
            for (i, s) in per_core.iter().enumerate() {
                eprintln!("{label} core {i}: {s}");
            }
        }
        Ok(per_core)
    }
}

/// The counters [`Cores::serve_until`] printed, read back from a server's output `lines`:
/// for each `{label} core i: COUNTERS` line, `COUNTERS` at index *i* (a later line for the
/// same core replaces an earlier one; a core without a line gets `""`). Empty when no line
/// has the prefix (a one-core server prints none). How tests and benchmarks read a child
/// server's per-core counters.
pub fn core_lines<'a>(lines: &'a [String], label: &str) -> Vec<&'a str> {
    let prefix = format!("{label} core ");
    let mut per_core = Vec::new();
    for l in lines {
        let Some((core, counters)) = l
            .strip_prefix(prefix.as_str())
            .and_then(|r| r.split_once(": "))
        else {
            continue;
        };
        let Ok(i) = core.parse::<usize>() else {
            continue;
        };
        if per_core.len() <= i {
            per_core.resize(i + 1, "");
        }
        per_core[i] = counters;
    }
    per_core
}

impl<R, S> fmt::Debug for Cores<R, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cores")
            .field("cores", &self.joins.len())
            .finish()
    }
}

/// The address of core `core` when core 0 listens on `base`: one port per core, `base`'s port
/// plus the core index (a client steers a request to a core by its destination port). Port 0
/// stays 0 (each core then picks its own port and reports it). An error when the ports run
/// past 65535.
pub fn core_addr(
    base: std::net::SocketAddrV4,
    core: usize,
) -> Result<std::net::SocketAddrV4, String> {
    if base.port() == 0 {
        return Ok(base);
    }
    let port = usize::from(base.port()) + core;
    u16::try_from(port)
        .map(|p| std::net::SocketAddrV4::new(*base.ip(), p))
        .map_err(|_| format!("core {core}'s port {port} (base {base}) is past 65535"))
}

/// The core (0..`cores`) that owns `key` under key steering (`docs/cores.md`): the 64-bit
/// FNV-1a hash of its bytes, mod `cores`. Stable across processes and builds: clients, servers
/// and tests must agree on it.
pub fn core_of_key(key: &[u8], cores: usize) -> usize {
    if cores <= 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % cores as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn keys_steer_by_fnv1a() {
        // FNV-1a of "" is the offset basis; of "a", 0xaf63dc4c8601ec8c.
        assert_eq!(core_of_key(b"", 7), (0xcbf2_9ce4_8422_2325u64 % 7) as usize);
        assert_eq!(
            core_of_key(b"a", 1000),
            (0xaf63_dc4c_8601_ec8cu64 % 1000) as usize
        );
        assert_eq!(core_of_key(b"anything", 1), 0);
        assert_eq!(core_of_key(b"anything", 0), 0);
    }

    #[test]
    fn core_lines_read_back_what_serve_until_printed() {
        let lines: Vec<String> = [
            "[server] ready",
            "[server] core 1: received=4 echoed=4",
            "[server] core 0: received=2 echoed=2",
            "[server] core x: received=9",
            "[other] core 0: received=7",
            "[server] done: received=6",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            core_lines(&lines, "[server]"),
            ["received=2 echoed=2", "received=4 echoed=4"]
        );
        assert_eq!(core_lines(&lines, "[other]"), ["received=7"]);
        assert!(core_lines(&lines[..1], "[server]").is_empty());
        let gap = ["[server] core 1: a=1".to_owned()];
        assert_eq!(core_lines(&gap, "[server]"), ["", "a=1"]);
    }

    #[test]
    fn too_many_cores_is_a_clear_error() {
        let n = allowed_cores().unwrap().len();
        let e = cpus_for(n + 1).unwrap_err();
        assert!(
            e.contains(&format!("{} server cores asked for", n + 1)),
            "{e}"
        );
        assert!(cpus_for(0).is_err());
        let e = Cores::<(), ()>::spawn(&CoresConfig::new("t", n + 1), |_, r| {
            r.ready(());
            Ok(())
        })
        .unwrap_err();
        assert!(e.contains("asked for"), "{e}");
    }

    #[test]
    fn each_core_is_pinned_ready_and_returns_its_own_counters() {
        let n = allowed_cores().unwrap().len().min(2);
        let cores = Cores::spawn(&CoresConfig::new("t", n), |core, ready| {
            let cpu = core.cpu().unwrap();
            // Pinned: the thread may now run only on its CPU.
            assert_eq!(allowed_cores().map_err(|e| e.to_string())?, vec![cpu]);
            ready.ready((core.index(), cpu));
            // At least one poll per core, even when the stop flag is already set by the time
            // this thread runs again (it can be, right after `ready`, on a loaded machine).
            let mut polls = 0u64;
            loop {
                polls += 1;
                if core.stop().load(Ordering::Relaxed) {
                    break;
                }
                std::thread::yield_now();
            }
            Ok((core.index(), polls))
        })
        .unwrap();
        let ready = cores.ready().to_vec();
        assert_eq!(ready.len(), n);
        let cpus = allowed_cores().unwrap();
        for (i, (idx, cpu)) in ready.iter().enumerate() {
            assert_eq!((*idx, *cpu), (i, cpus[i]));
        }
        let stats = cores.stop().unwrap();
        assert_eq!(
            stats.iter().map(|s| s.0).collect::<Vec<_>>(),
            (0..n).collect::<Vec<_>>()
        );
        assert!(stats.iter().all(|s| s.1 > 0));
    }

    #[test]
    fn cores_run_on_the_cpus_chosen_beforehand() {
        let allowed = allowed_cores().unwrap();
        let last = *allowed.last().unwrap();
        // Core 0 on the last allowed CPU, whatever the spawner's affinity is by then.
        let cfg = CoresConfig::new("t", 1).on_cpus(vec![last]);
        let cores = Cores::spawn(&cfg, |core, ready| {
            ready.ready(allowed_cores().map_err(|e| e.to_string())?);
            while !core.stop().load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            Ok(core.cpu())
        })
        .unwrap();
        assert_eq!(cores.ready(), &[vec![last]]);
        assert_eq!(cores.stop().unwrap(), vec![Some(last)]);
        let e = Cores::<(), ()>::spawn(&CoresConfig::new("t", 2).on_cpus(vec![last]), |_, r| {
            r.ready(());
            Ok(())
        })
        .unwrap_err();
        assert!(e.contains("only CPUs"), "{e}");
    }

    #[test]
    fn a_setup_failure_stops_the_other_cores_and_names_the_core() {
        let n = allowed_cores().unwrap().len().min(2);
        let ended = Arc::new(AtomicU64::new(0));
        let e2 = ended.clone();
        let mut cfg = CoresConfig::new("t", n);
        cfg.pin = false;
        let e = Cores::<(), ()>::spawn(&cfg, move |core, ready| {
            if core.index() + 1 == core.count() {
                return Err("binding port 1: in use".to_owned());
            }
            ready.ready(());
            while !core.stop().load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            e2.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(e, format!("server core {}: binding port 1: in use", n - 1));
        assert_eq!(ended.load(Ordering::Relaxed), n as u64 - 1);
        let e = Cores::<(), ()>::spawn(&cfg, |_, _| Ok(())).unwrap_err();
        assert!(e.contains("ended before it was ready"), "{e}");
    }

    #[test]
    fn a_core_that_panics_makes_stop_an_error_naming_it() {
        let mut cfg = CoresConfig::new("t", 1);
        cfg.pin = false;
        let cores = Cores::<(), ()>::spawn(&cfg, |core, ready| {
            ready.ready(());
            while !core.stop().load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            panic!("bad state");
        })
        .unwrap();
        assert_eq!(cores.stop().unwrap_err(), "server core 0 panicked");
    }

    #[test]
    fn core_ports_follow_the_base_port() {
        let base: std::net::SocketAddrV4 = "127.0.0.1:7000".parse().unwrap();
        assert_eq!(core_addr(base, 3).unwrap().port(), 7003);
        let zero: std::net::SocketAddrV4 = "127.0.0.1:0".parse().unwrap();
        assert_eq!(core_addr(zero, 3).unwrap().port(), 0);
        let top: std::net::SocketAddrV4 = "127.0.0.1:65535".parse().unwrap();
        assert!(core_addr(top, 1).unwrap_err().contains("past 65535"));
    }

    struct Counter(u32, u32);
    impl Poll for Counter {
        type Stats = u32;
        fn stats(&self) -> u32 {
            self.0
        }
        fn poll(&mut self) -> usize {
            self.0 += 1;
            usize::from(self.0.is_multiple_of(3))
        }
        fn report_line(&self) -> String {
            String::new()
        }
    }

    #[test]
    fn the_poll_loop_idles_after_empty_polls_and_stops() {
        let stop = AtomicBool::new(false);
        let mut c = Counter(0, 0);
        poll_loop(&mut c, &stop, None, 2, &mut |c: &mut Counter| {
            c.1 += 1;
            if c.0 >= 30 {
                stop.store(true, Ordering::Relaxed);
            }
        });
        // Polls 1,2 empty -> idle; 3 busy; 4,5 empty -> idle; ...: one idle per 3 polls, the
        // first at or after poll 30 (poll 32) stops the loop.
        assert_eq!((c.0, c.1), (32, 11));
    }
}
