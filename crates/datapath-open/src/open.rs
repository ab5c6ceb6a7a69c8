//! The one opener: [`DatapathSpec::open`] opens the chosen datapath at an address and hands it
//! to an [`OnDatapath`], which is generic over the datapath type (a server loop, a client, the
//! C API's handle table). The datapath crates each open their own device; this is the choice
//! among them and the "needs the feature" error of a build without one.

use std::net::SocketAddrV4;

use cornflakes::Datapath;
use datapath_socket::{SocketConfig, SocketDatapath};
use datapath_tcp::TcpDatapath;

use crate::{CargoRun, DatapathKind, DatapathSpec};

/// The IP MTUs a datapath opens with: IPv4's least datagram every host takes, to the largest
/// an IPv4 length field holds. A device may take fewer (its own error then says so).
pub const MTUS: std::ops::RangeInclusive<usize> = 576..=65535;

/// Where and with how much memory a datapath is opened, besides its [`DatapathSpec`].
#[derive(Clone, Debug)]
pub struct Open {
    /// The address (`socket.bind`: a server's, or a client's own, port 0 for any) and the
    /// socket datapath's settings (pinned memory, message size). Its `mtu` is the IP MTU when
    /// the spec gives none (AF_XDP then takes the interface's).
    pub socket: SocketConfig,
    /// `tcp`: listen at the address (a server), or only connect out (a client).
    pub listen: bool,
    /// ConnectX: the largest item the program sends from its own pinned memory, so pools are
    /// registered for it (0: packet buffers only).
    pub min_item: usize,
    /// ConnectX: pinned memory the program allocates beyond packet buffers (a store's values).
    pub extra_bytes: usize,
    /// AF_XDP: the UMEM (pinned memory) size when the program needs more than the default.
    pub umem_bytes: Option<usize>,
    /// How to build the program with a datapath's feature, for the error of a build without.
    pub cargo_run: CargoRun,
}

impl Open {
    /// A server at `bind` (TCP listens there), default memory.
    pub fn server(bind: SocketAddrV4, cargo_run: CargoRun) -> Open {
        Open {
            socket: SocketConfig::new(bind),
            listen: true,
            min_item: 0,
            extra_bytes: 0,
            umem_bytes: None,
            cargo_run,
        }
    }

    /// A client bound to `bind` (port 0: any; TCP only connects out), default memory.
    pub fn client(bind: SocketAddrV4, cargo_run: CargoRun) -> Open {
        Open {
            listen: false,
            ..Open::server(bind, cargo_run)
        }
    }

    /// The address.
    pub fn bind(&self) -> SocketAddrV4 {
        self.socket.bind
    }
}

/// What runs on an opened datapath, whichever it is.
pub trait OnDatapath {
    /// What it returns.
    type Out;

    /// Runs on `dp`, opened as `spec` says.
    fn on<D: Datapath + 'static>(self, dp: D, spec: &DatapathSpec) -> Result<Self::Out, String>;
}

impl DatapathSpec {
    /// The IP MTU: the spec's, else `default`.
    pub fn mtu_or(&self, default: usize) -> usize {
        self.mtu.unwrap_or(default)
    }

    /// Opens this datapath as `at` says and runs `app` on it: kernel UDP and TCP always,
    /// AF_XDP, ConnectX and DPDK when built with their feature (else
    /// [`crate::needs_feature`]'s error). The emulated ConnectX is opened by the bench that runs
    /// it, never here. An IP MTU outside [`MTUS`] is refused before anything is opened.
    pub fn open<A: OnDatapath>(&self, at: &Open, app: A) -> Result<A::Out, String> {
        let bind = at.bind();
        let mtu = self.mtu_or(at.socket.mtu);
        if !MTUS.contains(&mtu) {
            return Err(format!(
                "IP MTU {mtu} is outside {}..={}",
                MTUS.start(),
                MTUS.end()
            ));
        }
        match self.kind {
            DatapathKind::Socket => {
                let mut cfg = at.socket.clone();
                cfg.mtu = mtu;
                let dp = SocketDatapath::new(cfg).map_err(|e| format!("socket at {bind}: {e}"))?;
                app.on(dp, self)
            }
            DatapathKind::Tcp => {
                let mut cfg = self.tcp.config(at.listen.then_some(bind));
                cfg.stream.memory = at.socket.memory.clone();
                let dp = TcpDatapath::new(cfg).map_err(|e| format!("kernel TCP at {bind}: {e}"))?;
                app.on(dp, self)
            }
            #[cfg(feature = "xdp")]
            DatapathKind::Xdp => {
                let cfg = crate::xdp_config(self, bind, at.umem_bytes);
                let dp = datapath_xdp::XdpDatapath::new(cfg)
                    .map_err(|e| format!("AF_XDP on {} at {bind}: {e}", self.device))?;
                app.on(dp, self)
            }
            #[cfg(feature = "mlx5")]
            DatapathKind::Mlx5 => {
                let (item, extra) = (at.min_item, at.extra_bytes);
                let dp = datapath_mlx5::hw::open_server(&self.device, bind, mtu, item, extra)?;
                app.on(dp, self)
            }
            #[cfg(feature = "ice")]
            DatapathKind::Ice => {
                let args = &self.device;
                let dp = datapath_ice::datapath::open(args, bind, mtu)
                    .map_err(|e| format!("starting DPDK with {args:?}: {e}"))?;
                app.on(dp, self)
            }
            DatapathKind::Emu => Err(
                "--datapath emu is the emulated ConnectX a bench runs on its own core (`echo \
                 bench`, `kv bench`, `calibrate run`), not a device to open"
                    .to_owned(),
            ),
            // A kind whose feature is not built in.
            #[allow(unreachable_patterns)]
            kind => Err(crate::needs_feature(kind, &at.cargo_run)),
        }
    }
}
