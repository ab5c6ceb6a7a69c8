//! Server cores that outlive one run.
//!
//! [`run_cores`](crate::run_cores) starts the server threads with the run and ends them with
//! it, so whatever a server builds — its pinned memory, a key-value store's contents — is
//! built again for every run. A load that takes longer than the run itself (a store of
//! hundreds of megabytes: allocating, page-faulting and copying it) then dominates a
//! saturation search of dozens of runs. [`resident`] instead starts one thread per server core
//! for a whole series of runs: each builds its state once (`init`, on its pinned CPU), and
//! every [`Resident::run`] hands each core a fresh [`ServerPort`] of that run's device and
//! calls the run's job with the core's state. The state stays on its thread, so it need not
//! be `Send` (a [`PinnedMemory`](cornflakes::PinnedMemory) is not).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;

use datapath_mlx5::emu::threaded::{cores_for, pin_current_thread};

use crate::frames::Request;
use crate::run::{panicked, EmuReport, EmuRunConfig, Run, ServerPort};
use crate::wire::ReplyCheck;

/// A run's work on one core: the core's state and its port of the run's device.
type Job<'env, St, R> = Box<dyn FnOnce(&mut St, ServerPort) -> R + Send + 'env>;

/// One resident core, seen from the caller.
struct Core<'env, St, R> {
    jobs: Sender<(ServerPort, Job<'env, St, R>)>,
    results: Receiver<Result<R, String>>,
}

/// Server cores whose threads and state last for a series of runs ([`resident`]).
pub struct Resident<'env, St, R> {
    cores: Vec<Core<'env, St, R>>,
    pin: bool,
}

/// Starts `cores` server threads, pinned one per CPU (the device's CPU left free) when `pin`,
/// each building its state with `init(core)`, then calls `body` with them; every
/// [`Resident::run`] in `body` runs on these threads. Returns `body`'s result, or the first
/// core's `init` error (naming the core) before `body` runs. The threads end, dropping their
/// state, when `body` returns.
///
/// `pin` needs `cores + 1` CPUs, as [`EmuRunConfig::pin`] does, and every run must match it.
pub fn resident<'env, St, R, I, B, T>(
    cores: usize,
    pin: bool,
    init: I,
    body: B,
) -> Result<T, String>
where
    R: Send + 'env,
    I: Fn(usize) -> Result<St, String> + Sync,
    B: FnOnce(&Resident<'env, St, R>) -> Result<T, String>,
{
    if cores == 0 {
        return Err("resident server cores: at least one is needed".to_owned());
    }
    let cpus = if pin {
        Some(cores_for(cores).map_err(|e| e.to_string())?.0)
    } else {
        None
    };
    let init = &init;
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(cores);
        let mut ready = Vec::with_capacity(cores);
        for core in 0..cores {
            let (job_tx, job_rx) = channel::<(ServerPort, Job<'env, St, R>)>();
            let (res_tx, res_rx) = channel::<Result<R, String>>();
            let (init_tx, init_rx) = channel::<Result<(), String>>();
            let cpu = cpus.as_ref().map(|c| c[core]);
            std::thread::Builder::new()
                .name(format!("emu-server-{core}"))
                .spawn_scoped(s, move || {
                    let made = catch_unwind(AssertUnwindSafe(|| {
                        if let Some(cpu) = cpu {
                            pin_current_thread(cpu)
                                .map_err(|e| format!("server core {core}: {e}"))?;
                        }
                        init(core).map_err(|e| format!("server core {core}: {e}"))
                    }))
                    .unwrap_or_else(|_| {
                        Err(format!("server core {core}: its state's init panicked"))
                    });
                    let mut state = match made {
                        Ok(st) => {
                            let _ = init_tx.send(Ok(()));
                            st
                        }
                        Err(e) => {
                            let _ = init_tx.send(Err(e));
                            return;
                        }
                    };
                    let failed = loop {
                        let Ok((port, job)) = job_rx.recv() else {
                            break None;
                        };
                        match catch_unwind(AssertUnwindSafe(|| job(&mut state, port))) {
                            Ok(r) => {
                                if res_tx.send(Ok(r)).is_err() {
                                    break None;
                                }
                            }
                            // The state may be half-updated: this core serves no more runs.
                            Err(_) => break Some(panicked(cores, core)),
                        }
                    };
                    // Closed before the answer, so a run after this one finds the core gone.
                    drop(job_rx);
                    if let Some(e) = failed {
                        let _ = res_tx.send(Err(e));
                    }
                })
                .map_err(|e| format!("spawning the thread of server core {core}: {e}"))?;
            handles.push(Core {
                jobs: job_tx,
                results: res_rx,
            });
            ready.push(init_rx);
        }
        // Every core's state first (they build at the same time, each on its own CPU).
        for rx in ready {
            rx.recv().map_err(|_| {
                "a server core's thread ended while building its state".to_owned()
            })??;
        }
        let r = Resident {
            cores: handles,
            pin,
        };
        // Dropping `r` closes the job channels: the threads end and the scope joins them.
        body(&r)
    })
}

impl<'env, St, R: Send + 'env> Resident<'env, St, R> {
    /// How many server cores.
    pub fn cores(&self) -> usize {
        self.cores.len()
    }

    /// One run, as [`run_cores`](crate::run_cores) does it, with the resident cores as its
    /// servers: each core calls `job` with its state and its port of this run's device, and
    /// must serve until [`ServerPort::stopped`]. `cfg.cores` and `cfg.pin` must be those the
    /// cores were started with. Returns the report and each core's result, in core order.
    pub fn run<C, J>(
        &self,
        cfg: &EmuRunConfig,
        requests: &[Request],
        checker: C,
        job: J,
    ) -> Result<(EmuReport, Vec<R>), String>
    where
        C: ReplyCheck,
        J: Fn(&mut St, ServerPort) -> R + Send + Sync + 'env,
    {
        if cfg.cores != self.cores() || cfg.pin != self.pin {
            return Err(format!(
                "the run asks for {} server cores (pinned: {}), the resident ones are {} (pinned: {})",
                cfg.cores,
                cfg.pin,
                self.cores(),
                self.pin
            ));
        }
        let mut run = Run::start(cfg, requests, checker)?;
        let job = Arc::new(job);
        let mut outs: Vec<Option<Result<R, String>>> = (0..self.cores()).map(|_| None).collect();
        let mut broken = false;
        for (core, port) in run.take_ports().into_iter().enumerate() {
            let j = job.clone();
            let sent = self.cores[core]
                .jobs
                .send((port, Box::new(move |st: &mut St, p| j(st, p))));
            if sent.is_err() {
                // Its thread has ended (an earlier run's job panicked there).
                outs[core] = Some(Err(format!(
                    "server core {core} serves no more runs (a job panicked there earlier)"
                )));
                broken = true;
            }
        }
        // With a core gone the run cannot go on: its error is the outcome.
        let why = if broken {
            None
        } else {
            run.watch(|| {
                for (i, core) in self.cores.iter().enumerate() {
                    if outs[i].is_none() {
                        match core.results.try_recv() {
                            Ok(r) => outs[i] = Some(r),
                            Err(TryRecvError::Disconnected) => {
                                outs[i] = Some(Err(run.panicked(i)));
                            }
                            Err(TryRecvError::Empty) => continue,
                        }
                        return Some(i);
                    }
                }
                None
            })
        };
        run.stop_servers();
        let outs: Vec<Result<R, String>> = outs
            .into_iter()
            .enumerate()
            .map(|(i, o)| {
                o.unwrap_or_else(|| {
                    self.cores[i]
                        .results
                        .recv()
                        .unwrap_or_else(|_| Err(run.panicked(i)))
                })
            })
            .collect();
        let out = run.outcome(outs, why);
        run.finish(out)
    }
}
