//! Opening the kernel-bypass datapaths: AF_XDP (`cf_dp_xdp_new`, feature `xdp`), ConnectX
//! (`cf_dp_mlx5_new`, feature `mlx5`) and a DPDK port such as the E810 (`cf_dp_ice_new`, feature
//! `ice`). Every build has all three functions; one whose feature was not built returns
//! `CF_ERR_UNSUPPORTED` and says how to build it (`cf_dp_kinds` lists what this build has).
//! Once open, a datapath is used with the same `cf_dp_*` calls as the socket one.

use std::ffi::c_char;
use std::net::SocketAddrV4;

use crate::any_dp::AnyDatapath;
#[allow(unused_imports)] // which of these are used depends on the features
use crate::any_dp::{not_built, Opened};
use crate::dp::{addr, insert_dp};
use crate::error::{cf_status, cstr, guard, out, Result};
use crate::table::cf_dp;

/// The IP MTU the ConnectX and DPDK datapaths are opened with: Ethernet's 1500. The apps open
/// theirs with `--mtu` (9000 by default), so a C program on a NIC talks to an app started with
/// `--mtu 1500`.
pub const CF_NIC_MTU: usize = 1500;

/// Opens an AF_XDP datapath (feature `xdp`; needs root) on interface `ifname`'s queue 0,
/// answering at `ip:port` (the stack owns `ip` on that interface and answers ARP for it):
/// an XDP program redirects that UDP port to the socket, everything else goes on to the
/// kernel. Copy mode, so any interface works (veth too); the IP MTU is the interface's.
/// `peer` is NULL or `"IP=MAC"` (e.g. `"10.0.0.2=02:00:00:00:00:02"`, as the apps' `--peer`):
/// a static ARP entry, so the first send to that peer need not wait for address resolution
/// (without it, a send to a peer not yet resolved returns `CF_ERR_AGAIN` until the answer
/// arrives: keep calling `cf_dp_recv`). `umem_bytes` is the pinned memory (the UMEM, every
/// value sent by reference must live there; rounded up to 2 MiB); 0: 32 MiB. The datapath has
/// no file descriptor (`cf_dp_fd` returns `CF_ERR_UNSUPPORTED`): poll `cf_dp_recv`.
/// Create it on the thread, and in the network namespace, that will use it.
#[no_mangle]
pub extern "C" fn cf_dp_xdp_new(
    ifname: *const c_char,
    ip: *const c_char,
    port: u16,
    peer: *const c_char,
    umem_bytes: usize,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_xdp_new", || {
        let ifname = cstr(ifname, "ifname")?;
        let bind = addr(ip, port)?;
        let peer = if peer.is_null() {
            None
        } else {
            Some(cstr(peer, "peer")?)
        };
        let dp = xdp::open(ifname, bind, peer, umem_bytes)?;
        out(out_dp, "out_dp", insert_dp(dp)?)
    })
}

/// Opens a datapath on ConnectX `device` (feature `mlx5`; an RDMA device name such as
/// `mlx5_0`, or a PCI address) answering at `ip:port`, IP MTU [`CF_NIC_MTU`]. Its pinned
/// memory is registered with the NIC: items up to `max_item` bytes (0: 16 KiB) can be
/// allocated from it (`cf_dp_memory`) and sent by reference, and `extra_bytes` is memory
/// beyond the packet buffers the program will keep there (e.g. a store's values; 0: none).
/// No file descriptor: poll `cf_dp_recv`. The error names the devices present.
#[no_mangle]
pub extern "C" fn cf_dp_mlx5_new(
    device: *const c_char,
    ip: *const c_char,
    port: u16,
    max_item: usize,
    extra_bytes: usize,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_mlx5_new", || {
        let device = cstr(device, "device")?;
        let bind = addr(ip, port)?;
        let dp = mlx5::open(device, bind, max_item, extra_bytes)?;
        out(out_dp, "out_dp", insert_dp(dp)?)
    })
}

/// Opens a datapath on a DPDK port (feature `ice`: the Intel E810 through DPDK's ice driver,
/// or any DPDK device) answering at `ip:port`, IP MTU [`CF_NIC_MTU`]. `dpdk_args` are the EAL
/// arguments naming the port, as the apps' `--dpdk-args` (e.g. `"-l 2 -a 0000:3b:00.0"`, or
/// a virtual device: `"--vdev net_af_packet0,iface=veth0"`). DPDK's EAL starts once per
/// process, with the first call's arguments. No file descriptor: poll `cf_dp_recv`.
#[no_mangle]
pub extern "C" fn cf_dp_ice_new(
    dpdk_args: *const c_char,
    ip: *const c_char,
    port: u16,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_ice_new", || {
        let args = cstr(dpdk_args, "dpdk_args")?;
        let bind = addr(ip, port)?;
        let dp = ice::open(args, bind)?;
        out(out_dp, "out_dp", insert_dp(dp)?)
    })
}

/// The datapaths this library was built with, space-separated: `"socket"` always, then
/// `xdp`, `mlx5`, `ice` for each built in (a static string).
#[no_mangle]
pub extern "C" fn cf_dp_kinds() -> *const c_char {
    KINDS
        .get_or_init(|| {
            std::ffi::CString::new(crate::any_dp::BUILT.join(" ")).expect("no NUL in the names")
        })
        .as_ptr()
}

static KINDS: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Which datapath `dp` is: `"socket"`, `"xdp"`, `"mlx5"` or `"ice"` (a static string).
#[no_mangle]
pub extern "C" fn cf_dp_kind(dp: cf_dp, out_kind: *mut *const c_char) -> cf_status {
    guard("cf_dp_kind", || {
        let k = crate::table::with(|t| Ok(crate::dp::dp_of(t, dp)?.dp.kind()))?;
        let c = match k {
            "xdp" => c"xdp",
            "mlx5" => c"mlx5",
            "ice" => c"ice",
            "emu" => c"emu",
            _ => c"socket",
        };
        out(out_kind, "out_kind", c.as_ptr())
    })
}

#[cfg(feature = "xdp")]
mod xdp {
    use super::*;
    use crate::error::Error;
    use cornflakes_stack::wire::MacAddr;
    use datapath_xdp::{XdpConfig, XdpDatapath};

    pub(super) fn open(
        ifname: &str,
        bind: SocketAddrV4,
        peer: Option<&str>,
        umem_bytes: usize,
    ) -> Result<Box<dyn AnyDatapath>> {
        let mut cfg = XdpConfig::new(ifname, bind);
        if let Some(p) = peer {
            let (ip, mac) = netns_harness::host::parse_peer(p).map_err(Error::invalid)?;
            cfg.static_arp.push((ip, MacAddr(mac)));
        }
        if umem_bytes > 0 {
            cfg.umem_bytes = umem_bytes;
        }
        let dp = XdpDatapath::new(cfg).map_err(|e| {
            Error::new(
                cf_status::CF_ERR_IO,
                format!("AF_XDP on {ifname} at {bind}: {e}"),
            )
        })?;
        Ok(Box::new(Opened {
            dp,
            kind: "xdp",
            fd: None,
        }))
    }
}

#[cfg(not(feature = "xdp"))]
mod xdp {
    use super::*;

    pub(super) fn open(
        _: &str,
        _: SocketAddrV4,
        _: Option<&str>,
        _: usize,
    ) -> Result<Box<dyn AnyDatapath>> {
        Err(not_built(
            "xdp",
            "clang and libbpf-dev",
            "crates/datapath-xdp",
        ))
    }
}

#[cfg(feature = "mlx5")]
mod mlx5 {
    use super::*;
    use crate::error::Error;

    pub(super) fn open(
        device: &str,
        bind: SocketAddrV4,
        max_item: usize,
        extra_bytes: usize,
    ) -> Result<Box<dyn AnyDatapath>> {
        let dp = datapath_mlx5::hw::open_server(device, bind, CF_NIC_MTU, max_item, extra_bytes)
            .map_err(|e| Error::new(cf_status::CF_ERR_IO, format!("ConnectX {device}: {e}")))?;
        Ok(Box::new(Opened {
            dp,
            kind: "mlx5",
            fd: None,
        }))
    }
}

#[cfg(not(feature = "mlx5"))]
mod mlx5 {
    use super::*;

    pub(super) fn open(
        _: &str,
        _: SocketAddrV4,
        _: usize,
        _: usize,
    ) -> Result<Box<dyn AnyDatapath>> {
        Err(not_built("mlx5", "rdma-core", "crates/datapath-mlx5"))
    }
}

#[cfg(feature = "ice")]
mod ice {
    use super::*;
    use crate::error::Error;

    pub(super) fn open(dpdk_args: &str, bind: SocketAddrV4) -> Result<Box<dyn AnyDatapath>> {
        let dp = datapath_ice::datapath::open(dpdk_args, bind, CF_NIC_MTU).map_err(|e| {
            Error::new(
                cf_status::CF_ERR_IO,
                format!("DPDK port {dpdk_args:?} at {bind}: {e}"),
            )
        })?;
        Ok(Box::new(Opened {
            dp,
            kind: "ice",
            fd: None,
        }))
    }
}

#[cfg(not(feature = "ice"))]
mod ice {
    use super::*;

    pub(super) fn open(_: &str, _: SocketAddrV4) -> Result<Box<dyn AnyDatapath>> {
        Err(not_built("ice", "DPDK", "crates/datapath-ice"))
    }
}
