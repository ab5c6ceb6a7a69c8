//! The hand-over of each trial of the emulated ConnectX (`cf_dp_emu_new`) between the
//! control thread that runs the plan ([`crate::emu_plan`]) and the program's thread that
//! serves it ([`crate::emu_arm`]): the trial's port goes one way, what the server did comes back.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use emu_bench::ServerPort;
use loadgen::interference::ThreadSched;
use percore::TimeSplit;

/// The IP MTU of the emulated port (jumbo frames, as the Rust benches' default).
pub(crate) const EMU_MTU: usize = 9000;

/// What a trial's server side reports when it gives the port back.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Served {
    /// Where the server thread's time went in the trial.
    pub split: TimeSplit,
    /// Messages it received.
    pub received: u64,
    /// The server thread's time from taking the trial's port to giving it back, ns.
    pub span_ns: u64,
    /// Of it, the thread's time on its CPU and waiting for it (`None`: no schedstats).
    pub sched: Option<ThreadSched>,
}

#[derive(Default)]
enum Slot {
    /// No trial.
    #[default]
    Idle,
    /// A trial's port, not yet taken by the server thread.
    Offered(Arc<ServerPort>),
    /// The server thread serves the trial.
    Serving,
    /// The server thread gave the trial back (or could not open it).
    Returned(std::result::Result<Served, String>),
    /// The datapath was released: no more trials.
    Closed,
}

/// The hand-over of each trial's port between the control thread and the server thread.
#[derive(Default)]
pub(crate) struct Handoff {
    slot: Mutex<Slot>,
    cv: Condvar,
}

/// How long a trial waits for the server thread to take its port or give it back after the
/// trial ended: a program that stops polling `cf_dp_recv` fails the trial, not the process.
const GIVE_BACK: Duration = Duration::from_secs(10);

impl Handoff {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the datapath was released.
    pub(crate) fn closed(&self) -> bool {
        matches!(*self.lock(), Slot::Closed)
    }

    /// Runs one trial's server side (on `emu_bench`'s server thread): hands `port` to the
    /// program's thread and waits until it gives it back.
    pub(crate) fn serve(&self, port: ServerPort) -> std::result::Result<Served, String> {
        let port = Arc::new(port);
        let mut s = self.lock();
        if matches!(*s, Slot::Closed) {
            return Err("the datapath was released".to_owned());
        }
        *s = Slot::Offered(port.clone());
        self.cv.notify_all();
        let mut since_stop: Option<std::time::Instant> = None;
        loop {
            match std::mem::take(&mut *s) {
                Slot::Returned(r) => return r,
                Slot::Closed => {
                    *s = Slot::Closed;
                    return Err("the datapath was released during a trial".to_owned());
                }
                other => *s = other,
            }
            if port.stopped() {
                let t = *since_stop.get_or_insert_with(std::time::Instant::now);
                if t.elapsed() > GIVE_BACK {
                    let why = if matches!(*s, Slot::Offered(_)) {
                        "the program did not call cf_dp_recv during the trial"
                    } else {
                        "the program did not call cf_dp_recv within 10 s of the trial's end"
                    };
                    *s = Slot::Idle;
                    return Err(why.to_owned());
                }
            }
            s = self
                .cv
                .wait_timeout(s, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub(crate) fn take_offered(&self) -> Option<Arc<ServerPort>> {
        let mut s = self.lock();
        match std::mem::take(&mut *s) {
            Slot::Offered(p) => {
                *s = Slot::Serving;
                Some(p)
            }
            other => {
                *s = other;
                None
            }
        }
    }

    pub(crate) fn give_back(&self, r: std::result::Result<Served, String>) {
        let mut s = self.lock();
        if !matches!(*s, Slot::Closed) {
            *s = Slot::Returned(r);
        }
        self.cv.notify_all();
    }

    pub(crate) fn close(&self) {
        *self.lock() = Slot::Closed;
        self.cv.notify_all();
    }
}
