//! Opening the kernel-bypass datapaths: AF_XDP (`cf_dp_xdp_new`, feature `xdp`), ConnectX
//! (`cf_dp_mlx5_new`, `cf_dp_mlx5_new_opts`, feature `mlx5`) and a DPDK port such as the E810
//! (`cf_dp_ice_new`, `cf_dp_ice_new_opts`, feature `ice`). Every build has all of them; one
//! whose feature was not built returns `CF_ERR_UNSUPPORTED` and says how to build it
//! (`cf_dp_kinds` lists what this build has). Each is opened by the apps' own opener
//! (`datapath-open`'s `DatapathSpec::open`), so a C program and an app open a device the same
//! way. Once open, a datapath is used with the same `cf_dp_*` calls as the socket one.

use std::ffi::c_char;

use cornflakes::Datapath;
use datapath_open::{CargoRun, DatapathKind, DatapathSpec, OnDatapath, Open, MTUS};

use crate::any_dp::{not_built, AnyDatapath, Opened};
use crate::dp::{addr, insert_dp};
use crate::error::{cf_status, cstr, guard, out, slice_of, Error, Result};
use crate::table::cf_dp;

/// The IP MTU the ConnectX and DPDK datapaths are opened with unless [`cf_nic_opts`] says
/// otherwise: Ethernet's 1500. The apps open theirs with `--mtu` (9000 by default), so a C
/// program on a NIC opened with the default talks to an app started with `--mtu 1500`, or sets
/// `mtu` to the app's.
pub const CF_NIC_MTU: usize = 1500;

/// Settings of a ConnectX or DPDK datapath (`cf_dp_mlx5_new_opts`, `cf_dp_ice_new_opts`). Zero
/// in a field means its default; start from `struct cf_nic_opts opts = {0};` and set what you
/// need.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cf_nic_opts {
    /// IP MTU, in bytes (576 to 65535, and at most what the port takes): the largest datagram
    /// sent and received; 0: [`CF_NIC_MTU`]. Match the peer's: an app server's `--mtu`.
    pub mtu: usize,
    /// ConnectX only: the largest item allocated from the pinned memory (`cf_dp_memory`) and
    /// sent by reference; 0: 16 KiB.
    pub max_item: usize,
    /// ConnectX only: pinned memory beyond the packet buffers the program will keep there (a
    /// store's values); 0: none.
    pub extra_bytes: usize,
}

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
        let mut spec = device(DatapathKind::Xdp, ifname);
        spec.peer = peer
            .map(datapath_open::parse_peer)
            .transpose()
            .map_err(Error::invalid)?;
        let mut at = Open::server(bind, CARGO_RUN);
        at.umem_bytes = (umem_bytes > 0).then_some(umem_bytes);
        open(&spec, &at, out_dp)
    })
}

/// Opens a datapath on ConnectX `device` (feature `mlx5`; an RDMA device name such as
/// `mlx5_0`, or a PCI address) answering at `ip:port`, IP MTU [`CF_NIC_MTU`]. Its pinned
/// memory is registered with the NIC: items up to `max_item` bytes (0: 16 KiB) can be
/// allocated from it (`cf_dp_memory`) and sent by reference, and `extra_bytes` is memory
/// beyond the packet buffers the program will keep there (e.g. a store's values; 0: none).
/// No file descriptor: poll `cf_dp_recv`. The error names the devices present.
/// `cf_dp_mlx5_new_opts` takes another MTU.
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
        let opts = cf_nic_opts {
            max_item,
            extra_bytes,
            ..cf_nic_opts::default()
        };
        open_nic(
            DatapathKind::Mlx5,
            cstr(device, "device")?,
            ip,
            port,
            opts,
            out_dp,
        )
    })
}

/// As `cf_dp_mlx5_new`, with the settings in `*opts` (NULL: the defaults): the IP MTU, the
/// largest item and the extra pinned memory. An MTU outside 576–65535 is refused
/// (`CF_ERR_INVALID`) before the device is opened.
#[no_mangle]
pub extern "C" fn cf_dp_mlx5_new_opts(
    device: *const c_char,
    ip: *const c_char,
    port: u16,
    opts: *const cf_nic_opts,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_mlx5_new_opts", || {
        let device = cstr(device, "device")?;
        open_nic(
            DatapathKind::Mlx5,
            device,
            ip,
            port,
            read_opts(opts)?,
            out_dp,
        )
    })
}

/// Opens a datapath on a DPDK port (feature `ice`: the Intel E810 through DPDK's ice driver,
/// or any DPDK device) answering at `ip:port`, IP MTU [`CF_NIC_MTU`]. `dpdk_args` are the EAL
/// arguments naming the port, as the apps' `--dpdk-args` (e.g. `"-l 2 -a 0000:3b:00.0"`, or
/// a virtual device: `"--vdev net_af_packet0,iface=veth0"`). DPDK's EAL starts once per
/// process, with the first call's arguments. No file descriptor: poll `cf_dp_recv`.
/// `cf_dp_ice_new_opts` takes another MTU.
#[no_mangle]
pub extern "C" fn cf_dp_ice_new(
    dpdk_args: *const c_char,
    ip: *const c_char,
    port: u16,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_ice_new", || {
        let args = cstr(dpdk_args, "dpdk_args")?;
        open_nic(
            DatapathKind::Ice,
            args,
            ip,
            port,
            cf_nic_opts::default(),
            out_dp,
        )
    })
}

/// As `cf_dp_ice_new`, with the settings in `*opts` (NULL: the defaults; only `mtu` applies to
/// a DPDK port). An MTU outside 576–65535 is refused (`CF_ERR_INVALID`) before the EAL starts.
#[no_mangle]
pub extern "C" fn cf_dp_ice_new_opts(
    dpdk_args: *const c_char,
    ip: *const c_char,
    port: u16,
    opts: *const cf_nic_opts,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_ice_new_opts", || {
        let args = cstr(dpdk_args, "dpdk_args")?;
        open_nic(DatapathKind::Ice, args, ip, port, read_opts(opts)?, out_dp)
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

/// How to build this library with a datapath's feature (the opener's hint; the C API says its
/// own, [`not_built`]).
const CARGO_RUN: CargoRun = CargoRun {
    package: "cornflakes-c",
    bin: None,
    args: "",
};

/// `kind` on `device` (an interface, a ConnectX, EAL arguments).
fn device(kind: DatapathKind, device: &str) -> DatapathSpec {
    DatapathSpec {
        device: device.to_owned(),
        ..DatapathSpec::new(kind)
    }
}

/// `*opts`, or the defaults when NULL.
fn read_opts(opts: *const cf_nic_opts) -> Result<cf_nic_opts> {
    if opts.is_null() {
        Ok(cf_nic_opts::default())
    } else {
        Ok(slice_of(opts, 1, "opts")?[0])
    }
}

/// A ConnectX or DPDK port at `ip:port` with `opts`.
fn open_nic(
    kind: DatapathKind,
    name: &str,
    ip: *const c_char,
    port: u16,
    opts: cf_nic_opts,
    out_dp: *mut cf_dp,
) -> Result<()> {
    let bind = addr(ip, port)?;
    let mut spec = device(kind, name);
    spec.mtu = Some(match opts.mtu {
        0 => CF_NIC_MTU,
        m if MTUS.contains(&m) => m,
        m => {
            return Err(Error::new(
                cf_status::CF_ERR_INVALID,
                format!("mtu {m} is outside {}..={}", MTUS.start(), MTUS.end()),
            ))
        }
    });
    let mut at = Open::server(bind, CARGO_RUN);
    (at.min_item, at.extra_bytes) = (opts.max_item, opts.extra_bytes);
    open(&spec, &at, out_dp)
}

/// Opens `spec` with the apps' opener and hands out its handle: a NULL `out_dp` is
/// `CF_ERR_NULL`, a kind this build lacks `CF_ERR_UNSUPPORTED` with how to build it, a device
/// that does not open `CF_ERR_IO` naming it.
fn open(spec: &DatapathSpec, at: &Open, out_dp: *mut cf_dp) -> Result<()> {
    // Before the device is touched: a handle with nowhere to go would close it at once.
    if out_dp.is_null() {
        return Err(Error::null("out_dp"));
    }
    let kind = spec.name();
    if !crate::any_dp::BUILT.contains(&kind) {
        let (needs, pkgs) = datapath_open::build_needs(spec.kind).unwrap_or(("nothing", "."));
        return Err(not_built(kind, needs, pkgs));
    }
    let dp = spec.open(at, Handle).map_err(|e| {
        let what = match spec.kind {
            DatapathKind::Mlx5 => format!("ConnectX {}", spec.device),
            DatapathKind::Ice => format!("DPDK port {:?} at {}", spec.device, at.bind()),
            _ => format!("{} at {}", spec.label(), at.bind()),
        };
        Error::new(cf_status::CF_ERR_IO, format!("{what}: {e}"))
    })?;
    out(out_dp, "out_dp", insert_dp(dp)?)
}

/// The opened datapath as a C handle's (no file descriptor: the C program polls `cf_dp_recv`).
struct Handle;

impl OnDatapath for Handle {
    type Out = Box<dyn AnyDatapath>;

    fn on<D: Datapath + 'static>(
        self,
        dp: D,
        spec: &DatapathSpec,
    ) -> std::result::Result<Self::Out, String> {
        Ok(Box::new(Opened {
            dp,
            kind: spec.name(),
            fd: None,
        }))
    }
}
