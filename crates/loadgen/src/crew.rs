//! Client threads that outlive a run: a [`Crew`] of long-lived threads, each keeping what it
//! opened once (a kernel-bypass NIC's queue, its pinned memory) across the runs of a sweep.
//!
//! [`run`](crate::run) spawns its client threads for one run and makes each a transport there.
//! A load generator on a kernel-bypass datapath cannot do that: its datapath is opened once per
//! client core, on that core's pinned thread, and (like its pinned memory) never leaves it;
//! DPDK starts once per process and a NIC queue is claimed once. So the threads are the
//! caller's — each takes one [`Member`] — and the crew hands them run after run:
//!
//! ```
//! use loadgen::fake::{check_echo, FakeEchoServer, FaultPlan};
//! use loadgen::{Crew, RunConfig, Schedule};
//! use std::sync::Arc;
//!
//! let server = FakeEchoServer::start(FaultPlan::default());
//! let (crew, members) = Crew::new(2);
//! std::thread::scope(|s| {
//!     for m in members {
//!         let server = &server;
//!         // Opened once, on the member's thread, used for every run.
//!         s.spawn(move || {
//!             let mut transport = server.connect();
//!             while let Some(job) = m.next_job() {
//!                 transport = match transport {
//!                     Ok(t) => Ok(job.run(t)),
//!                     Err(e) => Err(job.fail(e)),
//!                 };
//!             }
//!         });
//!     }
//!     for rate in [20_000.0, 40_000.0] {
//!         let sched = Schedule::poisson_point(rate, Default::default(), std::time::Duration::from_millis(20), 2, 1).unwrap();
//!         let r = crew.run(sched, &RunConfig::default(), Arc::new(check_echo)).unwrap();
//!         assert_eq!(r.counters.verified, r.counters.sent);
//!     }
//!     drop(crew); // the members' loops end
//! });
//! ```

use std::io;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Barrier};

use crate::run::{merge, run_thread, Progress, RunConfig, RunError, RunReport, ThreadResult};
use crate::schedule::Schedule;
use crate::transport::{ClientTransport, ResponseChecker};

/// A checker shared with the crew's threads.
pub type SharedChecker = Arc<dyn ResponseChecker + Send + Sync>;

/// The driving side of a crew: runs schedules on its members' threads.
#[derive(Debug)]
pub struct Crew {
    jobs: Vec<Sender<Job>>,
    done: Receiver<(usize, Result<ThreadResult, RunError>)>,
}

/// One long-lived client thread's side of a [`Crew`]: the runs it is handed.
#[derive(Debug)]
pub struct Member {
    index: usize,
    jobs: Receiver<Job>,
    done: Sender<(usize, Result<ThreadResult, RunError>)>,
}

/// One run's part for one member: run it on the member's transport ([`Job::run`]), or report
/// that the transport could not be made ([`Job::fail`]). Dropping it unrun counts as a failed
/// transport.
pub struct Job {
    index: usize,
    schedule: Arc<Schedule>,
    cfg: RunConfig,
    checker: SharedChecker,
    start: Arc<Barrier>,
    started: bool,
    done: Option<Sender<(usize, Result<ThreadResult, RunError>)>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("index", &self.index).finish()
    }
}

impl Crew {
    /// A crew of `n` members (at least 1): give each [`Member`] to one long-lived thread.
    pub fn new(n: usize) -> (Crew, Vec<Member>) {
        let (done_tx, done) = channel();
        let (jobs, members) = (0..n.max(1))
            .map(|index| {
                let (tx, rx) = channel();
                let m = Member {
                    index,
                    jobs: rx,
                    done: done_tx.clone(),
                };
                (tx, m)
            })
            .unzip();
        (Crew { jobs, done }, members)
    }

    /// Members (client threads).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Never true: a crew has at least one member.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Runs `schedule` (one part per member: its thread count must be the crew's size) as
    /// [`run`](crate::run) does, each member's part on its own thread with its own transport,
    /// the clocks starting together; returns the merged report. A member whose thread is gone
    /// counts as a transport that failed.
    pub fn run(
        &self,
        schedule: Schedule,
        cfg: &RunConfig,
        checker: SharedChecker,
    ) -> Result<RunReport, RunError> {
        let n = schedule.threads().len();
        if n != self.jobs.len() {
            return Err(RunError::Transport {
                thread: n.min(self.jobs.len()),
                source: io::Error::other(format!(
                    "a schedule for {n} threads on a crew of {}",
                    self.jobs.len()
                )),
            });
        }
        let schedule = Arc::new(schedule);
        let start = Arc::new(Barrier::new(n));
        let mut results: Vec<Option<Result<ThreadResult, RunError>>> =
            (0..n).map(|_| None).collect();
        let mut waiting = 0;
        for (index, tx) in self.jobs.iter().enumerate() {
            let job = Job {
                index,
                schedule: schedule.clone(),
                cfg: cfg.clone(),
                checker: checker.clone(),
                start: start.clone(),
                started: false,
                done: None,
            };
            match tx.send(job) {
                Ok(()) => waiting += 1,
                Err(_) => {
                    // The member's thread has ended: wait at the start in its place, so the
                    // others are not held up.
                    let start = start.clone();
                    std::thread::spawn(move || start.wait());
                    results[index] = Some(Err(gone(index)));
                }
            }
        }
        while waiting > 0 {
            match self.done.recv() {
                Ok((i, r)) => {
                    results[i] = Some(r);
                    waiting -= 1;
                }
                Err(_) => break,
            }
        }
        merge(
            &schedule,
            cfg,
            results
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.unwrap_or_else(|| Err(gone(i)))),
        )
    }
}

fn gone(thread: usize) -> RunError {
    RunError::Transport {
        thread,
        source: io::Error::other("the client thread has ended"),
    }
}

impl Member {
    /// Which member (client thread) this is: its part of each schedule.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Waits for the next run; `None` once the [`Crew`] is dropped (the thread may end).
    pub fn next_job(&self) -> Option<Job> {
        let mut job = self.jobs.recv().ok()?;
        job.done = Some(self.done.clone());
        Some(job)
    }
}

impl Job {
    /// Runs this member's part on `transport` (waiting for the other members first, so the
    /// clocks start together), reports it to the crew, and gives the transport back.
    pub fn run<T: ClientTransport>(mut self, mut transport: T) -> T {
        self.begin();
        let part = &self.schedule.threads()[self.index];
        let r = run_thread(
            part,
            &self.cfg,
            &mut transport,
            &*self.checker,
            &Progress::default(),
            None,
        );
        self.report(Ok(r));
        transport
    }

    /// Reports that this member's transport could not be made (`error`), and gives the error
    /// back.
    pub fn fail(mut self, error: io::Error) -> io::Error {
        let copy = io::Error::new(error.kind(), error.to_string());
        self.begin();
        self.report(Err(RunError::Transport {
            thread: self.index,
            source: copy,
        }));
        error
    }

    fn begin(&mut self) {
        if !std::mem::replace(&mut self.started, true) {
            self.start.wait();
        }
    }

    fn report(&mut self, r: Result<ThreadResult, RunError>) {
        if let Some(done) = self.done.take() {
            let _ = done.send((self.index, r));
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // Dropped unrun (or unwinding from a panic in the run): release the others if they
        // still wait for this member, and report.
        if self.done.is_some() {
            self.begin();
            let i = self.index;
            self.report(Err(RunError::Transport {
                thread: i,
                source: io::Error::other("the client thread dropped its run"),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{check_echo, FakeEchoServer, FaultPlan};
    use crate::schedule::{Bound, ScheduleConfig};

    fn schedule(n: u64, threads: usize) -> Schedule {
        Schedule::poisson(&ScheduleConfig {
            rate_rps: 100_000.0,
            bound: Bound::Count(n),
            threads,
            seed: 3,
        })
        .unwrap()
    }

    #[test]
    fn transports_outlive_runs_and_a_lying_server_is_counted() {
        let server = FakeEchoServer::start(FaultPlan {
            drop_every: 0,
            corrupt_every: 10,
        });
        let (crew, members) = Crew::new(2);
        let made = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for m in members {
                let (server, made) = (&server, &made);
                s.spawn(move || {
                    let mut t = server.connect().unwrap();
                    made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    while let Some(job) = m.next_job() {
                        t = job.run(t);
                    }
                });
            }
            let cfg = RunConfig::default();
            for _ in 0..3 {
                let r = crew
                    .run(schedule(400, 2), &cfg, Arc::new(check_echo))
                    .unwrap();
                assert_eq!(r.counters.sent, 400);
                assert!(r.counters.mismatched > 0, "the corrupted replies");
                assert_eq!(r.counters.verified + r.counters.mismatched, 400);
                assert_eq!(r.threads, 2);
            }
            // A schedule for another number of threads is refused, not run.
            assert!(crew
                .run(schedule(10, 3), &cfg, Arc::new(check_echo))
                .is_err());
            drop(crew);
        });
        assert_eq!(
            made.into_inner(),
            2,
            "one transport per member, for every run"
        );
    }

    #[test]
    fn a_member_that_fails_or_ends_does_not_hold_up_the_others() {
        let server = FakeEchoServer::start(FaultPlan::default());
        let (crew, mut members) = Crew::new(3);
        let ended = members.pop().unwrap();
        drop(ended);
        std::thread::scope(|s| {
            for m in members {
                let server = &server;
                s.spawn(move || {
                    while let Some(job) = m.next_job() {
                        if m.index() == 1 {
                            job.fail(io::Error::other("no queue"));
                        } else {
                            job.run(server.connect().unwrap());
                        }
                    }
                });
            }
            let e = crew
                .run(schedule(30, 3), &RunConfig::default(), Arc::new(check_echo))
                .unwrap_err();
            assert!(e.to_string().contains("no queue"), "{e}");
            drop(crew);
        });
    }
}
