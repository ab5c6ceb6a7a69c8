//! The emulated ConnectX behind `cf_dp_emu_new` (feature `emu`): the program's thread runs the real mlx5
//! driver ([`datapath_mlx5::Mlx5Datapath`]) against the emulated device of
//! `crates/datapath-mlx5/src/emu`, which runs on another CPU and plays the wire and open-loop
//! clients, as in the Rust benches (`crates/emu-bench`).
//!
//! The device, its clients and the saturation search run in this process, on threads the
//! library starts: a control thread waits for a *plan* (`DIR/plan.json`, written by a bench
//! once the program is ready, e.g. after loading its store) and runs it
//! ([`crate::emu_plan`]). Each trial is one `emu_bench::run` with a fresh device: its
//! server side is handed to the program's thread, which opens the driver on it in its next
//! `cf_dp_recv` (registering the datapath's one pinned memory with that device, as
//! `emu_bench`'s resident servers do) and gives it back once the trial is over. Between
//! trials `cf_dp_recv` finds nothing. The program's thread is pinned to the first of the
//! process's CPUs when the datapath is opened; the device runs on the second.
//!
//! What the server thread spent its time on is timed here, per trial, from the `cf_dp_recv`
//! calls alone ([`percore::TimeSplit`]): a poll that found messages and everything until the
//! next poll is busy (the program's handling, sends and flushes), a poll that found nothing
//! and the time until the next one idle. So a program that never waits between polls (a
//! kernel-bypass event loop) reports how much of its core the requests took.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cornflakes::datapath::{Completions, DropCounters, Receive, Transmit};
use cornflakes::{ConnId, Msg, PinnedMemory, RcBuf, RxMsg, SendError};
use cornflakes_codegen::dynamic::DynMessage;
use datapath_mlx5::emu::threaded::ThreadedQueues;
use datapath_mlx5::Mlx5Datapath;
use emu_bench::ServerPort;
use loadgen::interference::ThreadSched;

use crate::any_dp::AnyDatapath;
use crate::emu_handoff::{Handoff, Served, EMU_MTU};
use crate::error::{cf_status, Error, Result};

/// Where the server answers between trials and in every trial (one core).
const SERVER_ADDR: SocketAddrV4 = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 77, 0, 2), 7000);

/// The CPUs this process could run on before `cf_dp_emu_new` first pinned its caller: the
/// control thread runs on them, so the device and the trials' threads it starts can be
/// pinned to any of them.
static PROCESS_CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// Opens the datapath of `cf_dp_emu_new` on the run directory `dir`.
pub(crate) fn open(dir: PathBuf) -> Result<Box<dyn AnyDatapath>> {
    let cpus = match PROCESS_CPUS.get() {
        Some(c) => c.clone(),
        None => {
            let c = percore::allowed_cores()
                .map_err(|e| Error::new(cf_status::CF_ERR_IO, e.to_string()))?;
            PROCESS_CPUS.get_or_init(|| c).clone()
        }
    };
    if cpus.len() < 2 {
        return Err(Error::new(
            cf_status::CF_ERR_UNSUPPORTED,
            format!(
                "the emulated ConnectX needs 2 CPUs (one for the server, one for the device), \
                 but this process may only run on {cpus:?}"
            ),
        ));
    }
    let server_cpu = cpus[0];
    percore::pin_current_thread(server_cpu)
        .map_err(|e| Error::new(cf_status::CF_ERR_IO, e.to_string()))?;
    let mem =
        PinnedMemory::new(emu_bench::memory_config(EMU_MTU)).map_err(crate::buf::alloc_error)?;
    let handoff = Arc::new(Handoff::default());
    crate::emu_plan::start(dir, handoff.clone(), cpus)
        .map_err(|e| Error::new(cf_status::CF_ERR_IO, e.to_string()))?;
    Ok(Box::new(EmuArm {
        mem,
        handoff,
        serving: None,
        last_ns: percore::now_ns(),
        last_found: false,
    }))
}

/// The trial being served.
struct Serving {
    port: Arc<ServerPort>,
    dp: Mlx5Datapath<ThreadedQueues>,
    served: Served,
    /// When this thread took the port, and its scheduler reading then.
    taken_ns: u64,
    sched_at: Option<ThreadSched>,
}

/// The C API's emulated-ConnectX datapath: the one pinned memory, and the driver over the
/// current trial's device (none between trials).
struct EmuArm {
    mem: PinnedMemory,
    handoff: Arc<Handoff>,
    serving: Option<Serving>,
    /// When the last `cf_dp_recv` returned, and whether it found messages.
    last_ns: u64,
    last_found: bool,
}

/// How long the end of a trial waits for the device to complete the sends in flight.
const DRAIN: Duration = Duration::from_millis(200);

impl EmuArm {
    /// Gives the trial back once it is over, and takes the next one when it is offered.
    fn switch_trials(&mut self) {
        if self.serving.as_ref().is_some_and(|s| s.port.stopped()) {
            if let Some(mut s) = self.serving.take() {
                let _ = s.dp.flush();
                let until = std::time::Instant::now() + DRAIN;
                while s.dp.in_flight() > 0 && std::time::Instant::now() < until {
                    s.dp.poll_completions();
                }
                let mut served = s.served;
                served.span_ns = percore::now_ns().saturating_sub(s.taken_ns);
                served.sched = s
                    .sched_at
                    .zip(ThreadSched::now())
                    .map(|(at, now)| now.since(&at));
                // The driver detaches from the device before the port goes back.
                drop(s);
                self.handoff.give_back(Ok(served));
            }
        }
        if self.serving.is_none() {
            if let Some(port) = self.handoff.take_offered() {
                match port.datapath(self.mem.clone()) {
                    Ok(dp) => {
                        self.serving = Some(Serving {
                            port,
                            dp,
                            served: Served::default(),
                            taken_ns: percore::now_ns(),
                            sched_at: ThreadSched::now(),
                        });
                        self.last_ns = percore::now_ns();
                        self.last_found = false;
                    }
                    Err(e) => self.handoff.give_back(Err(format!(
                        "opening the driver on the trial's device: {e}"
                    ))),
                }
            }
        }
    }

    fn dp(&mut self) -> std::result::Result<&mut Mlx5Datapath<ThreadedQueues>, SendError> {
        match &mut self.serving {
            Some(s) => Ok(&mut s.dp),
            None => Err(SendError::Io(io::Error::other(
                "the emulated device is between trials",
            ))),
        }
    }
}

impl Drop for EmuArm {
    fn drop(&mut self) {
        if let Some(s) = self.serving.take() {
            drop(s);
            self.handoff
                .give_back(Err("the datapath was released during a trial".to_owned()));
        }
        self.handoff.close();
    }
}

impl AnyDatapath for EmuArm {
    fn kind(&self) -> &'static str {
        "emu"
    }
    fn fd(&self) -> Option<RawFd> {
        None
    }
    fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
    fn local_addr(&self) -> SocketAddrV4 {
        SERVER_ADDR
    }
    fn connect(&mut self, _peer: SocketAddrV4) -> io::Result<ConnId> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the emulated device's clients connect to the server, not the other way",
        ))
    }
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        let t0 = percore::now_ns();
        self.switch_trials();
        let Some(s) = &mut self.serving else {
            return Ok(0);
        };
        let since = t0.saturating_sub(self.last_ns);
        if self.last_found {
            s.served.split.handler_ns += since;
        } else {
            s.served.split.idle_ns += since;
        }
        let n = s.dp.recv_burst(out)?;
        let t1 = percore::now_ns();
        if n > 0 {
            s.served.split.receive_ns += t1.saturating_sub(t0);
            s.served.split.bursts += 1;
            s.served.split.requests += n as u64;
            s.served.received += n as u64;
        } else {
            s.served.split.idle_ns += t1.saturating_sub(t0);
        }
        self.last_ns = t1;
        self.last_found = n > 0;
        Ok(n)
    }
    fn counters(&self) -> DropCounters {
        self.serving
            .as_ref()
            .map_or_else(DropCounters::default, |s| s.dp.counters())
    }
    fn send_msg(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &DynMessage<'static>,
    ) -> std::result::Result<(), SendError> {
        self.dp()?.send_object(conn, msg, obj)
    }
    fn send_copy(
        &mut self,
        conn: ConnId,
        msg: Msg,
        data: &[u8],
    ) -> std::result::Result<(), SendError> {
        self.dp()?.send_copy(conn, msg, data)
    }
    fn send_sga(
        &mut self,
        conn: ConnId,
        msg: Msg,
        entries: &[RcBuf],
    ) -> std::result::Result<(), SendError> {
        self.dp()?.send_sga(conn, msg, entries)
    }
    fn flush(&mut self) -> std::result::Result<(), SendError> {
        match &mut self.serving {
            Some(s) => s.dp.flush(),
            None => Ok(()),
        }
    }
    fn poll_completions(&mut self) -> usize {
        self.serving.as_mut().map_or(0, |s| s.dp.poll_completions())
    }
    fn in_flight(&self) -> usize {
        self.serving.as_ref().map_or(0, |s| s.dp.in_flight())
    }
    fn max_message_len(&self) -> usize {
        self.serving
            .as_ref()
            .map_or(EMU_MTU, |s| s.dp.max_message_len())
    }
}
