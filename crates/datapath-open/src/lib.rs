//! The one datapath choice and the one opener, for servers, clients, benches and the C API
//! (`crates/datapath-open/README.md`).
//!
//! [`DatapathKind`] names the datapaths (`socket | tcp | xdp | mlx5 | ice`, and `emu` where a
//! bench runs its own device). [`DatapathSpec`] is what a command's `--datapath` and its flags
//! chose, and what every side must agree on: the device, the IP MTU (`--mtu`) and kernel TCP's
//! zero-copy settings ([`TcpSpec`]); each command says which kinds it takes. [`DatapathSpec::open`]
//! opens it and runs an [`OnDatapath`] on it; a build without a datapath's feature says how to
//! build it ([`needs_feature`]).
//!
//! ```
//! use cli_args::Args;
//! use datapath_open::{DatapathKind, DatapathSpec};
//!
//! let mut a = Args::from_line("--datapath tcp --tcp-zc off --mtu 1500");
//! let spec = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS)?;
//! assert_eq!((spec.kind, spec.mtu), (DatapathKind::Tcp, Some(1500)));
//! assert_eq!(spec.tcp.to_string(), "zero-copy off");
//!
//! let mut a = Args::from_line("--datapath mlx5 --mlx5-dev mlx5_0");
//! let e = DatapathSpec::from_args(&mut a, &[DatapathKind::Socket, DatapathKind::Xdp]);
//! assert_eq!(e.unwrap_err(), "unknown datapath \"mlx5\" (socket or xdp)");
//! # Ok::<(), String>(())
//! ```
//!
//! The cargo features `xdp`, `mlx5` and `ice` build the kernel-bypass datapaths in; the apps,
//! the server launcher and the C library forward theirs here.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod kind;
mod open;
mod spec;

pub use kind::DatapathKind;
pub use open::{OnDatapath, Open, MTUS};
pub use spec::{build_needs, needs_feature, CargoRun, DatapathSpec, TcpSpec};

/// Parses `--peer IP=MAC` (a static ARP entry of `--datapath xdp`).
pub use netns_harness::host::parse_peer;

/// The datapath crates behind the features, for what goes beyond opening one datapath (the
/// launcher's per-core spawners, the apps' AF_XDP benches).
#[cfg(feature = "ice")]
pub use datapath_ice;
#[cfg(feature = "mlx5")]
pub use datapath_mlx5;
#[cfg(feature = "xdp")]
pub use datapath_xdp;

/// AF_XDP's configuration for `spec` at `bind`: its interface, its static ARP entry, an
/// explicit MTU (else the interface's) and `umem_bytes` of UMEM when given (else the default).
#[cfg(feature = "xdp")]
pub fn xdp_config(
    spec: &DatapathSpec,
    bind: std::net::SocketAddrV4,
    umem_bytes: Option<usize>,
) -> datapath_xdp::XdpConfig {
    use cornflakes_stack::wire::MacAddr;
    let mut cfg = datapath_xdp::XdpConfig::new(&spec.device, bind);
    cfg.static_arp
        .extend(spec.peer.map(|(ip, mac)| (ip, MacAddr(mac))));
    cfg.mtu = spec.mtu;
    if let Some(b) = umem_bytes {
        cfg.umem_bytes = b;
    }
    cfg
}
