//! Several server cores on one DPDK port (the many-core server of issue 12): one RX/TX queue
//! pair per core, each core with its own pinned memory, pools, stack and connection table,
//! and `rte_flow` rules steering each core's destination UDP port to its RX queue (the
//! FlexNIC idea: the client picks the core, and so the key shard, by destination port).
//!
//! ```text
//! let port = open_cores(cfg, n)?;             // any thread: claims and configures n queue pairs
//! // then on each core's thread (the datapath is !Send, like its pinned memory):
//! let dp = port.open_core(i)?;                // builds core i's memory and pools, sets up
//!                                             // queue pair i, waits until all n are set up;
//!                                             // the last one starts the port and installs
//!                                             // the flow rules
//! ```
//!
//! A server uses [`crate::spawn::spawn_cores`], which does this on N pinned `percore`
//! threads and runs the caller's per-core server on each core's datapath.
//!
//! Core `i` answers at `cfg.addr`'s IP and UDP port `cfg.addr.port() + i`. Without flow
//! rules (PMDs without `rte_flow`, such as the virtual devices: [`CorePort::steering`] says
//! so) a NIC delivers everything to queue 0, and a frame reaching a core whose port it does
//! not name is dropped by that core's stack (`unknown_port`): nothing is forwarded between
//! cores, which share nothing. `net_ring` links ([`RingLink::with_queues`]) deliver on the
//! queue the sender used, which the tests use to exercise the queue-per-core plumbing.
//!
//! [`RingLink::with_queues`]: crate::ffi::eal::RingLink::with_queues

use std::io;
use std::net::SocketAddrV4;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::datapath::{
    io_err, release_port, resolve_port, IceDatapath, Owned, Plan, PortGuard, SharedPort,
};
use crate::ffi::port::{self, OffloadBits, PortInfo, UdpFlow};
use crate::IceConfig;

/// How long a core waits for the other cores to set up their queues before giving up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How received frames are steered to the cores' queues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Steering {
    /// The port has not started yet (not every core has opened its queue).
    NotStarted,
    /// One `rte_flow` rule per core: IPv4/UDP to the core's port goes to its RX queue.
    Flow,
    /// The PMD refused the rules (the message says why): the NIC's default applies (queue 0,
    /// or the sender's queue on a `net_ring` link).
    Unsupported(String),
}

struct Setup {
    /// `open_core` was called for the core.
    opened: Vec<bool>,
    /// The core's queue pair is set up.
    ready: Vec<bool>,
    started: bool,
    failed: Option<String>,
    steering: Steering,
    flows: Vec<UdpFlow>,
    /// The whole port was stopped (a PMD that cannot stop single queues).
    stopped: bool,
    /// Cores whose datapath was built, and those of them whose datapath went away.
    live: usize,
    leaving: usize,
    owned: Option<Owned>,
}

/// A DPDK port shared by several cores, one RX/TX queue pair each (see the module docs).
/// Shared (`Arc`) by the caller and every core's datapath; the port is stopped and released
/// when the last of them is gone.
pub struct CorePort {
    port: u16,
    cores: usize,
    cfg: IceConfig,
    info: PortInfo,
    plan: Plan,
    state: Mutex<Setup>,
    cv: Condvar,
}

impl std::fmt::Debug for CorePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorePort")
            .field("port", &self.port)
            .field("cores", &self.cores)
            .field("driver", &self.info.driver)
            .field("steering", &self.steering())
            .finish()
    }
}

/// Claims the port `cfg.port` names and configures one RX/TX queue pair for each of `cores`
/// server cores. The EAL must be running. Each core then calls [`CorePort::open_core`] on its
/// own thread. `cfg` applies to every core (memory, pools and descriptors are per core).
pub fn open_cores(cfg: IceConfig, cores: usize) -> io::Result<Arc<CorePort>> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let queues = u16::try_from(cores)
        .ok()
        .filter(|&q| q > 0)
        .ok_or_else(|| invalid(format!("{cores} cores: need 1 to 65535")))?;
    if cfg.addr.port().checked_add(queues - 1).is_none() {
        return Err(invalid(format!(
            "{cores} cores from UDP port {} pass port 65535",
            cfg.addr.port()
        )));
    }
    let (port, owned) = resolve_port(&cfg.port)?;
    let mut guard = PortGuard {
        port,
        owned: Some(owned),
    };
    let info = port::info(port).map_err(io_err)?;
    let bits = OffloadBits::get();
    let plan = Plan::new(&cfg, &info, &bits);
    let (tx_off, rx_off) = IceDatapath::port_offloads(&info, &bits, plan.offload);
    let mtu = u16::try_from(cfg.mtu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU above 65535"))?;
    port::configure_queues(port, queues, tx_off, rx_off, mtu).map_err(io_err)?;
    let owned = guard.owned.take();
    Ok(Arc::new(CorePort {
        port,
        cores,
        cfg,
        info,
        plan,
        state: Mutex::new(Setup {
            opened: vec![false; cores],
            ready: vec![false; cores],
            started: false,
            failed: None,
            steering: Steering::NotStarted,
            flows: Vec::new(),
            stopped: false,
            live: 0,
            leaving: 0,
            owned,
        }),
        cv: Condvar::new(),
    }))
}

impl CorePort {
    fn lock(&self) -> MutexGuard<'_, Setup> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The port id.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many cores share the port.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// The address core `core` answers at: the configured IP, UDP port + `core`.
    pub fn core_addr(&self, core: usize) -> SocketAddrV4 {
        SocketAddrV4::new(*self.cfg.addr.ip(), self.cfg.addr.port() + core as u16)
    }

    /// How frames are steered to the cores (known once every core has opened its queue).
    pub fn steering(&self) -> Steering {
        self.lock().steering.clone()
    }

    fn fail(&self, st: &mut Setup, why: String) -> io::Error {
        st.failed.get_or_insert(why.clone());
        self.cv.notify_all();
        io::Error::other(why)
    }

    /// Core `core`'s datapath, to be called **on that core's thread**: its pinned memory
    /// (registered with the port's device), its receive and transmit pools, queue pair `core`
    /// set up over them. It waits until every core has set up its queue pair; the last one
    /// starts the port and installs one `rte_flow` rule per core. Each core may open once.
    pub fn open_core(self: &Arc<Self>, core: usize) -> io::Result<IceDatapath> {
        {
            let mut st = self.lock();
            if core >= self.cores {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("core {core} of a port shared by {} cores", self.cores),
                ));
            }
            if std::mem::replace(&mut st.opened[core], true) {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("core {core} of port {} is already open", self.port),
                ));
            }
            if let Some(f) = &st.failed {
                return Err(io::Error::other(format!("port {}: {f}", self.port)));
            }
        }
        let memory = match IceDatapath::build_memory(&self.cfg, &self.info, self.plan.offload) {
            Ok(m) => m,
            Err(e) => {
                let mut st = self.lock();
                return Err(self.fail(&mut st, format!("core {core}: {e}")));
            }
        };
        let mut st = self.lock();
        if let Some(f) = &st.failed {
            // Never started: the queues of a stopped port hold no mbufs of our pools, so they
            // may go (with `memory`).
            return Err(io::Error::other(format!("port {}: {f}", self.port)));
        }
        let q = core as u16;
        let pool = memory.2.pins.pool();
        if let Err(e) = port::setup_queue(self.port, q, self.cfg.rx_descs, self.cfg.tx_descs, pool)
        {
            return Err(self.fail(&mut st, format!("core {core}: {e}")));
        }
        st.ready[core] = true;
        if st.ready.iter().all(|&r| r) {
            if let Err(e) = port::start(self.port, self.cfg.promiscuous) {
                return Err(self.fail(&mut st, format!("core {core}: {e}")));
            }
            let mut flows = Vec::with_capacity(self.cores);
            let mut steering = Steering::Flow;
            for c in 0..self.cores {
                match UdpFlow::create(self.port, self.core_addr(c).port(), c as u16) {
                    Ok(f) => flows.push(f),
                    Err(e) => {
                        // All or nothing: a partial rule set would split the cores' traffic
                        // two ways.
                        flows.clear();
                        steering = Steering::Unsupported(e.to_string());
                        break;
                    }
                }
            }
            st.flows = flows;
            st.steering = steering;
            st.started = true;
            self.cv.notify_all();
        }
        let deadline = Instant::now() + SETUP_TIMEOUT;
        while !st.started {
            if let Some(f) = &st.failed {
                // The port never starts; our queue holds no mbufs of our pools (see above).
                return Err(io::Error::other(format!("port {}: {f}", self.port)));
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<usize> = (0..self.cores).filter(|&c| !st.ready[c]).collect();
                let why = format!(
                    "cores {missing:?} did not set up their queues within {} s",
                    SETUP_TIMEOUT.as_secs()
                );
                return Err(self.fail(&mut st, why));
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        st.live += 1;
        drop(st);
        Ok(IceDatapath::assemble(
            &self.cfg,
            self.core_addr(core),
            (self.port, q),
            self.info.clone(),
            Owned::Core(Arc::clone(self) as Arc<dyn SharedPort>),
            self.plan,
            memory,
        ))
    }
}

impl SharedPort for CorePort {
    /// Stops queue pair `queue` when its core's datapath goes away, so the NIC writes no more
    /// into that core's buffers. A PMD that cannot stop single queues (the virtual devices)
    /// gets the whole port stopped once every core's datapath is going away: until then this
    /// waits (at most [`SETUP_TIMEOUT`], after which the port is stopped anyway), so drop the
    /// cores' datapaths together at the end of a run.
    fn stop_queue(&self, queue: u16) {
        let mut st = self.lock();
        st.leaving += 1;
        if st.stopped || port::stop_queue(self.port, queue).is_ok() {
            return;
        }
        let deadline = Instant::now() + SETUP_TIMEOUT;
        while !st.stopped && st.leaving < st.live {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if !st.stopped {
            port::stop(self.port);
            st.stopped = true;
            self.cv.notify_all();
        }
    }

    /// Frees what queue pair `queue` left in flight on a `net_ring` link (the ring it
    /// transmits into), after its core's datapath stopped using it.
    fn release_queue(&self, queue: u16) {
        if let Some(Owned::Ring(link)) = &self.lock().owned {
            link.drain_tx_queue(self.port, usize::from(queue));
        }
    }
}

impl Drop for CorePort {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        // Flows before the port is closed.
        st.flows.clear();
        port::stop(self.port);
        if let Some(o) = st.owned.take() {
            release_port(self.port, o);
        }
    }
}
