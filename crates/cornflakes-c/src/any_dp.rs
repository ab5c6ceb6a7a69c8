//! One `cf_dp` for every datapath: the socket one always, AF_XDP, ConnectX (mlx5) and DPDK
//! (ice) when the library is built with the cargo feature of the same name.
//!
//! `cornflakes::Datapath` takes generic objects (`send_object<O>`), so it is not object-safe;
//! the C API only ever sends its schema-driven `DynMessage`, so [`AnyDatapath`] is the
//! object-safe subset the `cf_dp_*` calls use, implemented once for every `Datapath` by
//! [`Opened`]. The kernel-bypass datapaths are opened by the apps' opener
//! (`datapath_open::DatapathSpec::open`, `crate::open`), with its `--peer IP=MAC` parsing.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;

use cornflakes::datapath::DropCounters;
use cornflakes::{ConnId, Datapath, Msg, PinnedMemory, RcBuf, RxMsg, SendError};
use cornflakes_codegen::dynamic::DynMessage;

/// What the C API does with a datapath, whichever it is.
pub(crate) trait AnyDatapath {
    /// `socket`, `xdp`, `mlx5` or `ice`.
    fn kind(&self) -> &'static str;
    /// A descriptor to wait on for received messages, if the datapath has one.
    fn fd(&self) -> Option<RawFd>;
    fn memory(&self) -> &PinnedMemory;
    fn local_addr(&self) -> SocketAddrV4;
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId>;
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize>;
    fn counters(&self) -> DropCounters;
    fn send_msg(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &DynMessage<'static>,
    ) -> Result<(), SendError>;
    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError>;
    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError>;
    fn flush(&mut self) -> Result<(), SendError>;
    fn poll_completions(&mut self) -> usize;
    fn in_flight(&self) -> usize;
    fn max_message_len(&self) -> usize;
}

/// A datapath opened by the C API, with what the traits do not say about it.
pub(crate) struct Opened<D> {
    pub dp: D,
    pub kind: &'static str,
    pub fd: Option<RawFd>,
}

impl<D: Datapath> AnyDatapath for Opened<D> {
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn fd(&self) -> Option<RawFd> {
        self.fd
    }
    fn memory(&self) -> &PinnedMemory {
        self.dp.memory()
    }
    fn local_addr(&self) -> SocketAddrV4 {
        self.dp.local_addr()
    }
    fn connect(&mut self, peer: SocketAddrV4) -> io::Result<ConnId> {
        self.dp.connect(peer)
    }
    fn recv_burst(&mut self, out: &mut Vec<RxMsg>) -> io::Result<usize> {
        self.dp.recv_burst(out)
    }
    fn counters(&self) -> DropCounters {
        self.dp.counters()
    }
    fn send_msg(
        &mut self,
        conn: ConnId,
        msg: Msg,
        obj: &DynMessage<'static>,
    ) -> Result<(), SendError> {
        self.dp.send_object(conn, msg, obj)
    }
    fn send_copy(&mut self, conn: ConnId, msg: Msg, data: &[u8]) -> Result<(), SendError> {
        self.dp.send_copy(conn, msg, data)
    }
    fn send_sga(&mut self, conn: ConnId, msg: Msg, entries: &[RcBuf]) -> Result<(), SendError> {
        self.dp.send_sga(conn, msg, entries)
    }
    fn flush(&mut self) -> Result<(), SendError> {
        self.dp.flush()
    }
    fn poll_completions(&mut self) -> usize {
        self.dp.poll_completions()
    }
    fn in_flight(&self) -> usize {
        self.dp.in_flight()
    }
    fn max_message_len(&self) -> usize {
        self.dp.max_message_len()
    }
}

/// The datapaths this build can open, in the order `cf_dp_kinds` lists them.
pub(crate) const BUILT: &[&str] = &[
    "socket",
    #[cfg(feature = "emu")]
    "emu",
    #[cfg(feature = "xdp")]
    "xdp",
    #[cfg(feature = "mlx5")]
    "mlx5",
    #[cfg(feature = "ice")]
    "ice",
];

/// `d`'s descriptor for `cf_dp_fd`, or the error of a datapath without one.
pub(crate) fn fd_of(d: &dyn AnyDatapath) -> crate::error::Result<RawFd> {
    d.fd().ok_or_else(|| {
        crate::error::Error::new(
            crate::error::cf_status::CF_ERR_UNSUPPORTED,
            format!(
                "the {} datapath has no file descriptor to wait on: poll cf_dp_recv",
                d.kind()
            ),
        )
    })
}

/// The error of opening a datapath this build does not have.
#[allow(dead_code)] // unused when every datapath is built in
pub(crate) fn not_built(kind: &str, needs: &str, pkgs: &str) -> crate::error::Error {
    crate::error::Error::new(
        crate::error::cf_status::CF_ERR_UNSUPPORTED,
        format!(
            "this library was built without the `{kind}` datapath: rebuild it with `cargo build \
             --release -p cornflakes-c --features {kind}` ({needs}: apt-get install -y $(cat \
             {pkgs}/APT_PACKAGES))"
        ),
    )
}
