//! A load generator's client cores on a kernel-bypass datapath (`echo client`, `kv client`
//! with `--datapath xdp | mlx5 | ice`, and the AF_XDP benches): each core opens its own queue
//! once ([`app_server::spawn_on_cores`]: core *i* at the launch's address, port plus *i*),
//! connects to every server core, waits for ARP and then runs its part of every load point as
//! a member of a [`loadgen::Crew`], with a fresh transport per point built by the app's
//! [`CoreClient`]. Each app keeps only how its transport is built.

use std::io;
use std::net::SocketAddrV4;
use std::time::Duration;

use app_server::{Launch, OnCore, OnCores};
use cornflakes::{ConnId, Datapath};
use loadgen::{ClientTransport, Crew, RunConfig, RunReport, Schedule, SharedChecker};
use percore::QueueInfo;

use crate::{client_core, Members};

/// How long a client core waits for the servers' ARP answers before it gives up.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// What an app's client cores build for each load point: its transport over the core's
/// datapath.
pub trait CoreClient: Send + Sync + 'static {
    /// The app's transport over a datapath `D`.
    type Transport<D: Datapath>: ClientTransport;

    /// Core `core`'s transport for one load point: `dp`, connected to every server core
    /// (`conns[k]` to server core *k*).
    fn client<D: Datapath>(
        &self,
        dp: D,
        conns: &[ConnId],
        core: usize,
    ) -> io::Result<Self::Transport<D>>;

    /// The datapath back from a transport once its point is over.
    fn datapath<D: Datapath>(transport: Self::Transport<D>) -> D;
}

/// Client cores running on a kernel-bypass datapath, and the crew that hands them load points.
pub struct BypassClients {
    crew: Crew,
    cores: OnCores<()>,
}

impl BypassClients {
    /// Starts `l.cores` client cores on `l.spec` (core *i* at `l.socket.bind`'s port plus
    /// *i*), each connected to the server cores at `servers` and building its transports with
    /// `client`; returns once every one is ready (its servers resolved), printing their ready
    /// lines (`[client] core i ready at ADDR (QUEUE)`).
    pub fn spawn<C: CoreClient>(
        l: &Launch,
        servers: &[SocketAddrV4],
        client: C,
    ) -> Result<BypassClients, String> {
        let (crew, members) = Crew::new(l.cores.max(1));
        let body = OnEachCore {
            servers: servers.to_vec(),
            members: Members::new(members),
            client,
        };
        let cores = app_server::spawn_on_cores(l, body)?;
        for (i, (addr, what)) in cores.ready().iter().enumerate() {
            eprintln!("[client] core {i} ready at {addr} ({what})");
        }
        Ok(BypassClients { crew, cores })
    }

    /// Runs one load point on every client core ([`Crew::run`]).
    pub fn run(
        &self,
        schedule: Schedule,
        cfg: &RunConfig,
        checker: SharedChecker,
    ) -> Result<RunReport, loadgen::RunError> {
        self.crew.run(schedule, cfg, checker)
    }

    /// What each client core reported when ready: its address and queue.
    pub fn ready(&self) -> &[QueueInfo] {
        self.cores.ready()
    }

    /// Ends the client cores (after their current point) and closes their datapaths.
    pub fn stop(self) -> Result<(), String> {
        drop(self.crew);
        self.cores.join().map(drop)
    }
}

/// Every client core's body: connect, resolve, then each point of the sweep.
struct OnEachCore<C> {
    servers: Vec<SocketAddrV4>,
    members: Members,
    client: C,
}

impl<C: CoreClient> OnCore for OnEachCore<C> {
    type Out = ();

    fn run<D: Datapath>(
        &self,
        dp: D,
        core: &percore::Core,
        ready: percore::Ready<QueueInfo>,
        info: QueueInfo,
    ) -> Result<(), String> {
        let i = core.index();
        client_core(
            dp,
            &self.servers,
            self.members.take(i)?,
            RESOLVE_TIMEOUT,
            || ready.ready(info),
            |d, conns| self.client.client(d, conns, i),
            C::datapath,
        )
    }
}
