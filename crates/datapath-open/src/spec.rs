//! What `--datapath` and its flags chose: [`DatapathSpec`], parsed once for every command, and
//! kernel TCP's own settings ([`TcpSpec`]).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};

use cli_args::Args;
use datapath_tcp::{TcpConfig, ZeroCopy, ZeroCopyMode};

use crate::DatapathKind;

/// Linux kernel TCP's own settings (`--datapath tcp`), the same for every command that opens a
/// TCP datapath — servers, clients and benches: which sends are zero-copy, `--tcp-zc MODE`
/// (`msg-zerocopy`, the default; `io-uring`; `off`) and `--tcp-zc-threshold BYTES` (the
/// least zero-copy field that makes a send zero-copy, 16384 by default; docs/tcp.md,
/// "Zero-copy sends").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpSpec {
    /// Which sends are zero-copy, and how.
    pub zero_copy: ZeroCopy,
}

impl TcpSpec {
    /// The flags, for usage texts.
    pub const FLAGS: &'static str =
        "[--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]";

    /// Takes `--tcp-zc MODE` and `--tcp-zc-threshold BYTES` from `a`: the settings, or `None`
    /// when neither is given (the defaults apply). A threshold with `--tcp-zc off` is an error.
    pub fn from_args(a: &mut Args) -> Result<Option<TcpSpec>, String> {
        let mode = a.parse::<ZeroCopyMode>("--tcp-zc")?;
        let threshold = a.parse::<usize>("--tcp-zc-threshold")?;
        if mode == Some(ZeroCopyMode::Off) && threshold.is_some() {
            return Err("--tcp-zc-threshold goes with a zero-copy mode, not --tcp-zc off".into());
        }
        let zero_copy = match (mode, threshold) {
            (None, None) => return Ok(None),
            (Some(ZeroCopyMode::Off), _) => ZeroCopy::OFF,
            (mode, threshold) => {
                let d = ZeroCopy::default();
                ZeroCopy {
                    mode: mode.unwrap_or(d.mode),
                    threshold: threshold.unwrap_or(d.threshold),
                }
            }
        };
        Ok(Some(TcpSpec { zero_copy }))
    }

    /// [`Self::from_args`] for a command whose datapath is kernel TCP only when `tcp`: the
    /// settings (the defaults without the flags), or an error when they are given with
    /// another datapath.
    pub fn for_datapath(a: &mut Args, tcp: bool) -> Result<TcpSpec, String> {
        match Self::from_args(a)? {
            Some(_) if !tcp => {
                Err("--tcp-zc and --tcp-zc-threshold go with --datapath tcp".to_owned())
            }
            spec => Ok(spec.unwrap_or_default()),
        }
    }

    /// A TCP datapath's configuration with these settings, listening on `listen` (or none).
    pub fn config(&self, listen: Option<SocketAddrV4>) -> TcpConfig {
        let mut c = TcpConfig::new(listen);
        c.zero_copy = self.zero_copy;
        c
    }
}

impl fmt::Display for TcpSpec {
    /// `zero-copy msg-zerocopy for fields of 16384 B and more`, or `zero-copy off`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zero-copy {}", self.zero_copy)
    }
}

/// The datapath a command runs on and what every side of it must agree on: `--datapath KIND`,
/// where its device is, the IP MTU and kernel TCP's zero-copy settings. Read once by
/// [`DatapathSpec::from_args`] (servers) or [`DatapathSpec::choose`] (benches and clients),
/// opened by [`DatapathSpec::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatapathSpec {
    /// Which datapath.
    pub kind: DatapathKind,
    /// Where its device is: the interface for `xdp` (`--ifname IF`), the ConnectX for `mlx5`
    /// (`--mlx5-dev DEV`, an RDMA name or a PCI address), the EAL arguments naming the port
    /// for `ice` (`--dpdk-args ARGS`); empty for the others.
    pub device: String,
    /// `xdp`: a static ARP entry for the peer (`--peer IP=MAC`), so the first replies need not
    /// wait for address resolution.
    pub peer: Option<(Ipv4Addr, [u8; 6])>,
    /// The IP MTU when given (`--mtu`); `None`: the command's default (the apps' 9000), and on
    /// AF_XDP the interface's own.
    pub mtu: Option<usize>,
    /// `tcp`: which sends are zero-copy (`--tcp-zc`, `--tcp-zc-threshold`).
    pub tcp: TcpSpec,
}

impl DatapathSpec {
    /// `kind` with no device, no peer, the default MTU and TCP settings.
    pub fn new(kind: DatapathKind) -> DatapathSpec {
        DatapathSpec {
            kind,
            device: String::new(),
            peer: None,
            mtu: None,
            tcp: TcpSpec::default(),
        }
    }

    /// The `--datapath` value.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The device for a ready line: `ConnectX {device}`, `DPDK {dpdk_args}`, `AF_XDP on {IF}`,
    /// or the kind's name.
    pub fn label(&self) -> String {
        match self.kind {
            DatapathKind::Mlx5 => format!("ConnectX {}", self.device),
            DatapathKind::Ice => format!("DPDK {}", self.device),
            DatapathKind::Xdp => format!("AF_XDP on {}", self.device),
            k => k.name().to_owned(),
        }
    }

    /// A server's `--datapath` (default `socket`) among `accepts`, its device
    /// ([`Self::take_device`]), [`TcpSpec`]'s flags when `tcp` is accepted, and `--mtu`. A kind
    /// not accepted is [`DatapathKind::unknown`]'s error, naming the accepted ones.
    pub fn from_args(a: &mut Args, accepts: &[DatapathKind]) -> Result<DatapathSpec, String> {
        let mtu = a.parse::<usize>("--mtu")?;
        let mut spec = Self::choose(
            a,
            accepts,
            || DatapathKind::Socket,
            |name| DatapathKind::unknown(name, accepts),
        )?;
        spec.take_device(a)?;
        spec.mtu = mtu;
        Ok(spec)
    }

    /// `--datapath` among `accepts` (without it: `default()`) and [`TcpSpec`]'s flags when
    /// `tcp` is accepted (an error with another datapath), with the command's own error
    /// `refuse(name)` for a kind it does not take. Nothing else: a bench runs its own devices,
    /// and reads `--mtu` with its load flags; a command that opens a device by name goes on
    /// with [`Self::take_device`].
    pub fn choose(
        a: &mut Args,
        accepts: &[DatapathKind],
        default: impl FnOnce() -> DatapathKind,
        refuse: impl FnOnce(&str) -> String,
    ) -> Result<DatapathSpec, String> {
        let kind = match a.take("--datapath")? {
            None => default(),
            Some(name) => match name.parse::<DatapathKind>() {
                Ok(k) if accepts.contains(&k) => k,
                _ => return Err(refuse(&name)),
            },
        };
        let mut spec = DatapathSpec::new(kind);
        if accepts.contains(&DatapathKind::Tcp) {
            spec.tcp = TcpSpec::for_datapath(a, kind == DatapathKind::Tcp)?;
        }
        Ok(spec)
    }

    /// Takes the flags that say where this kind's device is: `--ifname IF [--peer IP=MAC]`
    /// for `xdp`, `--mlx5-dev DEV` for `mlx5`, `--dpdk-args ARGS` for `ice` (required); the
    /// other kinds have none.
    pub fn take_device(&mut self, a: &mut Args) -> Result<(), String> {
        let kind = self.kind;
        let required = |flag: &str, value: Option<String>| {
            value.ok_or_else(|| format!("--datapath {kind} needs {flag}"))
        };
        match kind {
            DatapathKind::Xdp => {
                self.device = required("--ifname IF", a.take("--ifname")?)?;
                self.peer = a
                    .take("--peer")?
                    .map(|p| netns_harness::host::parse_peer(&p))
                    .transpose()?;
            }
            DatapathKind::Mlx5 => {
                self.device = required("--mlx5-dev <mlx5_N | PCI address>", a.take("--mlx5-dev")?)?;
            }
            DatapathKind::Ice => {
                self.device = required("--dpdk-args \"<EAL arguments>\"", a.take("--dpdk-args")?)?;
            }
            DatapathKind::Socket | DatapathKind::Tcp | DatapathKind::Emu => {}
        }
        Ok(())
    }
}

/// How to build and run an app with a datapath's feature, for the error of a build without it:
/// `cargo run --release -p {package} --features {feature}[ --bin {bin}] -- {args}`.
#[derive(Clone, Copy, Debug)]
pub struct CargoRun {
    /// The app's package (`-p`).
    pub package: &'static str,
    /// Its binary, when the package has one not named after it (`--bin`).
    pub bin: Option<&'static str>,
    /// What follows `--` (e.g. `server ...`).
    pub args: &'static str,
}

impl CargoRun {
    /// The command line that builds and runs the app with `feature`.
    pub fn command(&self, feature: &str) -> String {
        let bin = self.bin.map(|b| format!(" --bin {b}")).unwrap_or_default();
        format!(
            "cargo run --release -p {} --features {feature}{bin} -- {}",
            self.package, self.args
        )
    }
}

/// What a kind behind a cargo feature needs to build: its system libraries and the crate whose
/// `APT_PACKAGES` lists them; `None` for the kinds every build has.
pub fn build_needs(kind: DatapathKind) -> Option<(&'static str, &'static str)> {
    match kind {
        DatapathKind::Xdp => Some(("clang and libbpf-dev", "crates/datapath-xdp")),
        DatapathKind::Mlx5 => Some(("rdma-core", "crates/datapath-mlx5")),
        DatapathKind::Ice => Some(("DPDK", "crates/datapath-ice")),
        DatapathKind::Socket | DatapathKind::Tcp | DatapathKind::Emu => None,
    }
}

/// The error of choosing `kind` in a build without its feature: which feature, the system
/// packages it needs, and `run`'s command line with it.
pub fn needs_feature(kind: DatapathKind, run: &CargoRun) -> String {
    let f = kind.name();
    let (needs, pkgs) = build_needs(kind).unwrap_or(("nothing", "."));
    format!(
        "--datapath {f} needs the `{f}` feature ({needs}: apt-get install -y $(cat {pkgs}/APT_PACKAGES)): {}",
        run.command(f)
    )
}

#[cfg(test)]
mod tests;
