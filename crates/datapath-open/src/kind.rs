//! The names of the datapaths: [`DatapathKind`], what `--datapath` says.

use std::fmt;
use std::str::FromStr;

/// Which datapath: the one type that names them, for servers, clients, benches and the C API.
/// A new transport is one more variant here (and its arm in [`crate::DatapathSpec::open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DatapathKind {
    /// Kernel UDP sockets (`datapath-socket`): unprivileged, the default.
    Socket,
    /// Linux kernel TCP (`datapath-tcp`): a client connection is a TCP connection, messages
    /// are length-delimited frames (docs/tcp.md).
    Tcp,
    /// AF_XDP on one interface (`datapath-xdp`, feature `xdp`, root).
    Xdp,
    /// A ConnectX NIC over rdma-core (`datapath-mlx5`, feature `mlx5`).
    Mlx5,
    /// An Intel E810, or any DPDK port (`datapath-ice`, feature `ice`).
    Ice,
    /// The ConnectX driver against the emulated ConnectX on a core of its own, which also plays
    /// the clients: what a bench runs on its own device (`emu-bench`), not opened by name.
    Emu,
}

impl DatapathKind {
    /// Every kind, in the order usage texts list them.
    pub const ALL: [DatapathKind; 6] = [
        DatapathKind::Socket,
        DatapathKind::Tcp,
        DatapathKind::Xdp,
        DatapathKind::Mlx5,
        DatapathKind::Ice,
        DatapathKind::Emu,
    ];

    /// What a server can run on: every kind but the bench's own emulated device.
    pub const SERVERS: &'static [DatapathKind] = &[
        DatapathKind::Socket,
        DatapathKind::Tcp,
        DatapathKind::Xdp,
        DatapathKind::Mlx5,
        DatapathKind::Ice,
    ];

    /// The `--datapath` value (and, for `xdp`, `mlx5` and `ice`, the cargo feature it needs).
    pub fn name(self) -> &'static str {
        match self {
            DatapathKind::Socket => "socket",
            DatapathKind::Tcp => "tcp",
            DatapathKind::Xdp => "xdp",
            DatapathKind::Mlx5 => "mlx5",
            DatapathKind::Ice => "ice",
            DatapathKind::Emu => "emu",
        }
    }

    /// `kinds` as a usage text lists them: `socket, tcp or xdp`.
    pub fn list(kinds: &[DatapathKind]) -> String {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }

    /// The error of a `--datapath` value a command does not take: `unknown datapath "x"
    /// (socket, tcp or xdp)`, naming the kinds it accepts.
    pub fn unknown(name: &str, accepts: &[DatapathKind]) -> String {
        format!(
            "unknown datapath {name:?} ({})",
            DatapathKind::list(accepts)
        )
    }
}

impl fmt::Display for DatapathKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DatapathKind {
    type Err = String;

    /// A kind by its `--datapath` name; the error lists every name.
    fn from_str(s: &str) -> Result<DatapathKind, String> {
        DatapathKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| DatapathKind::unknown(s, &DatapathKind::ALL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_back_from_its_name() {
        for k in DatapathKind::ALL {
            assert_eq!(k.name().parse::<DatapathKind>(), Ok(k));
            assert_eq!(k.to_string(), k.name());
        }
        assert_eq!(
            "dpdk".parse::<DatapathKind>().unwrap_err(),
            "unknown datapath \"dpdk\" (socket, tcp, xdp, mlx5, ice or emu)"
        );
    }

    #[test]
    fn lists_read_as_a_sentence() {
        assert_eq!(DatapathKind::list(&[]), "");
        assert_eq!(DatapathKind::list(&[DatapathKind::Emu]), "emu");
        assert_eq!(
            DatapathKind::list(DatapathKind::SERVERS),
            "socket, tcp, xdp, mlx5 or ice"
        );
    }
}
