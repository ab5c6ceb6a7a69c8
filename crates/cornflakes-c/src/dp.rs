//! The datapath calls: opening the kernel-socket datapath (crate `datapath-socket`; the
//! kernel-bypass ones are opened in `open.rs`), and for every datapath receive,
//! serialize-and-send of messages, sends of bytes and buffers, flush, counters.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;

use cornflakes::{ConnId, Msg, RcBuf, SendError};
use datapath_socket::{SetupError, SocketConfig, SocketDatapath};

use crate::any_dp::{AnyDatapath, Opened};

use crate::buf::{alloc_error, buf_of};
use crate::error::{cf_status, cstr, guard, out, slice_of, write_at, Error, Result};
use crate::table::{self, cf_buf, cf_dp, cf_mem, DpEntry, Entry, MsgEntry};

/// One received message.
#[repr(C)]
// `Default`: an empty slot to receive into, for Rust callers (no handle in `data`).
#[derive(Clone, Copy, Debug, Default)]
pub struct cf_rx {
    /// The connection it came on (answer on it with the `cf_dp_send_*` calls).
    pub conn: u32,
    /// The message id and type from the framing header (echo them, and `incarnation`, in the
    /// reply).
    pub msg_id: u32,
    /// See `msg_id`.
    pub msg_type: u16,
    /// The sender's UDP port (host byte order).
    pub peer_port: u16,
    /// The sender's IPv4 address (host byte order).
    pub peer_ip: u32,
    /// The sender's incarnation from the framing header (0: the sender gave none); a reply
    /// carries its request's (docs/wire-format.md, "Packet framing").
    pub incarnation: u64,
    /// The message's bytes (after the framing header), in pinned memory; the caller owns this
    /// handle and releases it (`cf_buf_release`).
    pub data: cf_buf,
}

/// Why messages were dropped on receive (docs/stack.md, "Counters"). The socket datapath
/// leaves the link, IP and ARP counters at zero (the kernel does those layers); the
/// kernel-bypass datapaths count them all.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cf_dp_counters {
    /// Messages handed to the program.
    pub delivered: u64,
    /// Frames or datagrams shorter than a header, or longer than a receive buffer.
    pub truncated: u64,
    /// Framing header malformed, or inconsistent with other segments of its message.
    pub bad_framing: u64,
    /// A segment already received.
    pub duplicate_segment: u64,
    /// Partial messages dropped after the reassembly timeout.
    pub reassembly_timeout: u64,
    /// Messages too large, or reassembly limits reached.
    pub reassembly_overflow: u64,
    /// No pinned buffer for a received frame.
    pub no_rx_buffers: u64,
    /// Messages from a new peer while the connection table was full.
    pub conn_table_full: u64,
    /// IPv4 header or UDP checksum mismatch.
    pub bad_checksum: u64,
    /// EtherType neither IPv4 nor ARP.
    pub non_ipv4: u64,
    /// IPv4 protocol other than UDP.
    pub non_udp: u64,
    /// IPv4 fragments (not reassembled).
    pub ip_fragment: u64,
    /// IPv4 headers with options.
    pub ip_options: u64,
    /// Other malformed IPv4 headers.
    pub bad_ip_header: u64,
    /// Destination MAC or IP address not ours.
    pub wrong_dst: u64,
    /// UDP destination port not ours.
    pub unknown_port: u64,
    /// ARP packets malformed or not for Ethernet/IPv4.
    pub bad_arp: u64,
    /// ARP resolutions that gave up.
    pub arp_failures: u64,
    /// All drop reasons added up.
    pub total_drops: u64,
}

pub(crate) fn dp_of(t: &mut table::Table, dp: cf_dp) -> Result<&mut DpEntry> {
    match t.get_mut(dp.id, "cf_dp")? {
        Entry::Dp(d) => Ok(d),
        _ => unreachable!("checked kind"),
    }
}

pub(crate) fn addr(ip: *const c_char, port: u16) -> Result<SocketAddrV4> {
    let ip = cstr(ip, "ip")?;
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| Error::invalid(format!("`{ip}` is not an IPv4 address")))?;
    Ok(SocketAddrV4::new(ip, port))
}

fn send_error(e: SendError) -> Error {
    let status = match &e {
        SendError::UnknownConn(_) => cf_status::CF_ERR_INVALID,
        SendError::Resolving(_) | SendError::Full => cf_status::CF_ERR_AGAIN,
        SendError::TooLarge { .. }
        | SendError::TooManySegments { .. }
        | SendError::BufferTooSmall(_) => cf_status::CF_ERR_TOO_LARGE,
        SendError::Alloc(_) => cf_status::CF_ERR_ALLOC,
        SendError::Io(_) => cf_status::CF_ERR_IO,
        // `SendError` is non-exhaustive: a reason added later is still an error.
        _ => cf_status::CF_ERR_IO,
    };
    Error::new(status, e.to_string())
}

/// The IP MTU a socket datapath is opened with unless [`cf_socket_opts`] says otherwise: the
/// apps' `--mtu` default, so a C program and an app agree with default settings on both sides.
/// A receiver's MTU must be at least its senders' (a larger datagram is dropped, counted as
/// `truncated` and told once on stderr).
pub const CF_SOCKET_MTU: usize = 9000;
const _: () = assert!(CF_SOCKET_MTU == datapath_socket::JUMBO_MTU);

/// Settings of a socket datapath (`cf_dp_socket_new_opts`). Zero in a field means its default;
/// start from `struct cf_socket_opts opts = {0};` and set what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct cf_socket_opts {
    /// Largest message and pinned buffer, in bytes (rounded up to a power of two, at most
    /// 2 MiB); 0: 16 KiB. Larger messages are segmented into MTU-sized datagrams.
    pub max_message_len: usize,
    /// IP MTU, in bytes (576 to 65535): the largest datagram sent, and received whole; 0:
    /// [`CF_SOCKET_MTU`]. Match the peer's: a server started with `--mtu 1500` talks to a
    /// client opened with 1500.
    pub mtu: usize,
}

/// Opens a socket datapath bound to `ip:port` (port 0 picks one; see `cf_dp_local_port`) with
/// its own pinned memory and the default settings (IP MTU [`CF_SOCKET_MTU`], messages up to
/// 16 KiB). The socket is nonblocking: `cf_dp_recv` never waits, and a program with an event
/// loop waits for `cf_dp_fd` to become readable. `cf_dp_socket_new_opts` takes other settings.
#[no_mangle]
pub extern "C" fn cf_dp_socket_new(ip: *const c_char, port: u16, out_dp: *mut cf_dp) -> cf_status {
    guard("cf_dp_socket_new", || {
        open(ip, port, cf_socket_opts::default(), out_dp)
    })
}

/// As `cf_dp_socket_new`, with messages and pinned buffers up to `max_message_len` bytes
/// (rounded up to a power of two, at most 2 MiB; 0: the default 16 KiB). Larger messages are
/// segmented into MTU-sized datagrams and reassembled. The same as `cf_dp_socket_new_opts`
/// with only `max_message_len` set.
#[no_mangle]
pub extern "C" fn cf_dp_socket_new_sized(
    ip: *const c_char,
    port: u16,
    max_message_len: usize,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_socket_new_sized", || {
        let opts = cf_socket_opts {
            max_message_len,
            ..cf_socket_opts::default()
        };
        open(ip, port, opts, out_dp)
    })
}

/// As `cf_dp_socket_new`, with the settings in `*opts` (NULL: the defaults). An MTU outside
/// 576–65535 or a `max_message_len` above 2 MiB is refused (`CF_ERR_INVALID`,
/// `CF_ERR_TOO_LARGE`).
#[no_mangle]
pub extern "C" fn cf_dp_socket_new_opts(
    ip: *const c_char,
    port: u16,
    opts: *const cf_socket_opts,
    out_dp: *mut cf_dp,
) -> cf_status {
    guard("cf_dp_socket_new_opts", || {
        let opts = if opts.is_null() {
            cf_socket_opts::default()
        } else {
            slice_of(opts, 1, "opts")?[0]
        };
        open(ip, port, opts, out_dp)
    })
}

fn open(ip: *const c_char, port: u16, opts: cf_socket_opts, out_dp: *mut cf_dp) -> Result<()> {
    let bind = addr(ip, port)?;
    let mut cfg = SocketConfig::new(bind);
    cfg.mtu = match opts.mtu {
        0 => CF_SOCKET_MTU,
        m @ 576..=65535 => m,
        m => {
            return Err(Error::new(
                cf_status::CF_ERR_INVALID,
                format!("mtu {m} is outside 576..=65535"),
            ))
        }
    };
    let max_len = opts.max_message_len;
    if max_len > 0 {
        if max_len > MAX_ITEM {
            return Err(Error::new(
                cf_status::CF_ERR_TOO_LARGE,
                format!(
                    "max_message_len {max_len} is above the largest pinned buffer ({MAX_ITEM})"
                ),
            ));
        }
        cfg.memory.max_item_size = max_len.next_power_of_two().max(cfg.memory.max_item_size);
        cfg.max_message_len = cfg.memory.max_item_size;
    }
    let dp = SocketDatapath::new(cfg).map_err(|e| match e {
        SetupError::Io { source: e, .. } => {
            Error::new(cf_status::CF_ERR_IO, format!("binding {bind}: {e}"))
        }
        SetupError::Memory(e) => alloc_error(e),
    })?;
    let fd = dp.socket().as_raw_fd();
    let dp = insert_dp(Box::new(Opened {
        dp,
        kind: "socket",
        fd: Some(fd),
    }))?;
    out(out_dp, "out_dp", dp)
}

/// A new handle to an opened datapath.
pub(crate) fn insert_dp(dp: Box<dyn AnyDatapath>) -> Result<cf_dp> {
    let id = table::with(|t| {
        t.insert(Entry::Dp(Box::new(DpEntry {
            dp,
            pending: VecDeque::new(),
            scratch: Vec::new(),
        })))
    })?;
    Ok(cf_dp { id })
}

/// The largest pinned item.
const MAX_ITEM: usize = cornflakes::mem::MemoryConfig::MAX_ITEM_SIZE;

/// Closes the datapath. Buffers received from it stay valid until released.
#[no_mangle]
pub extern "C" fn cf_dp_release(dp: cf_dp) -> cf_status {
    guard("cf_dp_release", || {
        table::with(|t| t.remove(dp.id, "cf_dp")).map(drop)
    })
}

/// The UDP port the datapath is bound to.
#[no_mangle]
pub extern "C" fn cf_dp_local_port(dp: cf_dp, out_port: *mut u16) -> cf_status {
    guard("cf_dp_local_port", || {
        let p = table::with(|t| Ok(dp_of(t, dp)?.dp.local_addr().port()))?;
        out(out_port, "out_port", p)
    })
}

/// The socket datapath's file descriptor, to wait for readability in an event loop (epoll,
/// Redis's ae). It stays the datapath's: do not read from it or close it. The kernel-bypass
/// datapaths have none (`CF_ERR_UNSUPPORTED`): poll `cf_dp_recv` instead.
#[no_mangle]
pub extern "C" fn cf_dp_fd(dp: cf_dp, out_fd: *mut c_int) -> cf_status {
    guard("cf_dp_fd", || {
        let fd = table::with(|t| crate::any_dp::fd_of(&*dp_of(t, dp)?.dp))?;
        out(out_fd, "out_fd", fd)
    })
}

/// A handle to the datapath's pinned memory: values allocated there (and arenas made with it)
/// are sent without a copy. Release the handle with `cf_mem_release`.
#[no_mangle]
pub extern "C" fn cf_dp_memory(dp: cf_dp, out_mem: *mut cf_mem) -> cf_status {
    guard("cf_dp_memory", || {
        let id = table::with(|t| {
            let m = dp_of(t, dp)?.dp.memory().clone();
            t.insert(Entry::Mem(m))
        })?;
        out(out_mem, "out_mem", cf_mem { id })
    })
}

/// The connection to `ip:port` (made on first use, then the same one).
#[no_mangle]
pub extern "C" fn cf_dp_connect(
    dp: cf_dp,
    ip: *const c_char,
    port: u16,
    out_conn: *mut u32,
) -> cf_status {
    guard("cf_dp_connect", || {
        let peer = addr(ip, port)?;
        let c = table::with(|t| {
            dp_of(t, dp)?
                .dp
                .connect(peer)
                .map_err(|e| Error::new(cf_status::CF_ERR_IO, format!("connecting to {peer}: {e}")))
        })?;
        out(out_conn, "out_conn", c.0)
    })
}

/// Receives up to `max` messages without waiting: `*out_count` of them are written to `out`
/// (0 when none are waiting). Each `data` handle is the caller's to release.
#[no_mangle]
pub extern "C" fn cf_dp_recv(
    dp: cf_dp,
    out_msgs: *mut cf_rx,
    max: usize,
    out_count: *mut usize,
) -> cf_status {
    guard("cf_dp_recv", || {
        if out_msgs.is_null() && max > 0 {
            return Err(Error::null("out"));
        }
        let n = table::with(|t| {
            let d = dp_of(t, dp)?;
            if d.pending.len() < max {
                let mut scratch = std::mem::take(&mut d.scratch);
                // Reap finished sends too (a NIC completes them after `cf_dp_flush`).
                d.dp.poll_completions();
                let r = d.dp.recv_burst(&mut scratch);
                d.pending.extend(scratch.drain(..));
                d.scratch = scratch;
                r.map_err(|e| Error::new(cf_status::CF_ERR_IO, format!("receiving: {e}")))?;
            }
            let take = max.min(d.pending.len());
            let msgs: Vec<_> = d.pending.drain(..take).collect();
            for (i, m) in msgs.into_iter().enumerate() {
                let rx = cf_rx {
                    conn: m.conn.0,
                    msg_id: m.msg.id,
                    msg_type: m.msg.ty,
                    peer_port: m.peer.port(),
                    peer_ip: u32::from(*m.peer.ip()),
                    incarnation: m.msg.incarnation,
                    data: cf_buf {
                        id: t.insert(Entry::Buf(m.data))?,
                    },
                };
                // `out_msgs` is non-null (checked above) and `i < take <= max`.
                write_at(out_msgs, i, rx);
            }
            Ok(take)
        })?;
        out(out_count, "out_count", n)
    })
}

/// Serialize-and-send (paper §3.2.3): queues `msg` to `conn` with one buffer for the headers
/// and copied fields and one scatter-gather entry per referenced value. Nothing is queued on
/// error. `CF_ERR_AGAIN`: the queue is full, `cf_dp_flush` and retry. The message may be
/// changed or released right after: the send holds its own references.
///
/// `incarnation`, `msg_id` and `msg_type` go in the framing header (docs/wire-format.md): a
/// reply passes its request's three (from its `cf_rx`); a client passes its own incarnation, a
/// random non-zero number it keeps for its whole life, and an id it never reuses under it, or
/// incarnation 0 when it has none (a server then tells its requests apart by address and id
/// only).
#[no_mangle]
pub extern "C" fn cf_dp_send_msg(
    dp: cf_dp,
    conn: u32,
    incarnation: u64,
    msg_id: u32,
    msg_type: u16,
    msg: crate::table::cf_msg,
) -> cf_status {
    guard("cf_dp_send_msg", || {
        table::with(|t| {
            let (d, m) = t.get_mut_and(dp.id, "cf_dp", msg.id, "cf_msg")?;
            let Entry::Dp(d) = d else {
                unreachable!("checked kind")
            };
            let obj = match m {
                Entry::Msg(MsgEntry::Root(r)) => &r.obj,
                Entry::Msg(MsgEntry::View { .. }) => {
                    return Err(Error::invalid("send the outer message, not a view into it"))
                }
                _ => unreachable!("checked kind"),
            };
            d.dp.send_msg(
                ConnId(conn),
                Msg::new(msg_id, msg_type).with_incarnation(incarnation),
                obj,
            )
            .map_err(send_error)
        })
    })
}

/// Queues a copy of `data[0..len]` to `conn` (the RESP replies, or any bytes); the framing
/// header's fields as for `cf_dp_send_msg`.
#[no_mangle]
pub extern "C" fn cf_dp_send_copy(
    dp: cf_dp,
    conn: u32,
    incarnation: u64,
    msg_id: u32,
    msg_type: u16,
    data: *const u8,
    len: usize,
) -> cf_status {
    guard("cf_dp_send_copy", || {
        let data = crate::error::bytes(data, len, "data")?;
        table::with(|t| {
            dp_of(t, dp)?
                .dp
                .send_copy(
                    ConnId(conn),
                    Msg::new(msg_id, msg_type).with_incarnation(incarnation),
                    data,
                )
                .map_err(send_error)
        })
    })
}

/// Queues the concatenation of `count` pinned buffers to `conn`, each as its own
/// scatter-gather entry (no copy); the framing header's fields as for `cf_dp_send_msg`.
#[no_mangle]
pub extern "C" fn cf_dp_send_bufs(
    dp: cf_dp,
    conn: u32,
    incarnation: u64,
    msg_id: u32,
    msg_type: u16,
    bufs: *const cf_buf,
    count: usize,
) -> cf_status {
    guard("cf_dp_send_bufs", || {
        let hs = slice_of(bufs, count, "bufs")?;
        table::with(|t| {
            let entries: Vec<RcBuf> = hs
                .iter()
                .map(|b| buf_of(t, *b).cloned())
                .collect::<Result<_>>()?;
            dp_of(t, dp)?
                .dp
                .send_sga(
                    ConnId(conn),
                    Msg::new(msg_id, msg_type).with_incarnation(incarnation),
                    &entries,
                )
                .map_err(send_error)
        })
    })
}

/// Hands the queued sends to the kernel (one `sendmmsg`) or the device, and reaps the sends
/// the device has finished, releasing the references they held. The socket datapath completes
/// every send here; a NIC may finish later: keep calling `cf_dp_flush` (or `cf_dp_recv`).
#[no_mangle]
pub extern "C" fn cf_dp_flush(dp: cf_dp) -> cf_status {
    guard("cf_dp_flush", || {
        table::with(|t| {
            let d = dp_of(t, dp)?;
            d.dp.flush().map_err(send_error)?;
            d.dp.poll_completions();
            Ok(())
        })
    })
}

/// Sends queued or posted whose buffers the device still holds (0 once every send completed;
/// the socket datapath completes them in `cf_dp_flush`).
#[no_mangle]
pub extern "C" fn cf_dp_in_flight(dp: cf_dp, out_count: *mut usize) -> cf_status {
    guard("cf_dp_in_flight", || {
        let n = table::with(|t| Ok(dp_of(t, dp)?.dp.in_flight()))?;
        out(out_count, "out_count", n)
    })
}

/// The largest message this datapath sends or accepts, in bytes.
#[no_mangle]
pub extern "C" fn cf_dp_max_message_len(dp: cf_dp, out_len: *mut usize) -> cf_status {
    guard("cf_dp_max_message_len", || {
        let n = table::with(|t| Ok(dp_of(t, dp)?.dp.max_message_len()))?;
        out(out_len, "out_len", n)
    })
}

/// The receive counters.
#[no_mangle]
pub extern "C" fn cf_dp_get_counters(dp: cf_dp, out_counters: *mut cf_dp_counters) -> cf_status {
    guard("cf_dp_get_counters", || {
        let c = table::with(|t| Ok(dp_of(t, dp)?.dp.counters()))?;
        out(
            out_counters,
            "out_counters",
            cf_dp_counters {
                delivered: c.delivered,
                truncated: c.truncated,
                bad_framing: c.bad_framing,
                duplicate_segment: c.duplicate_segment,
                reassembly_timeout: c.reassembly_timeout,
                reassembly_overflow: c.reassembly_overflow,
                no_rx_buffers: c.no_rx_buffers,
                conn_table_full: c.conn_table_full,
                bad_checksum: c.bad_checksum,
                non_ipv4: c.non_ipv4,
                non_udp: c.non_udp,
                ip_fragment: c.ip_fragment,
                ip_options: c.ip_options,
                bad_ip_header: c.bad_ip_header,
                wrong_dst: c.wrong_dst,
                unknown_port: c.unknown_port,
                bad_arp: c.bad_arp,
                arp_failures: c.arp_failures,
                total_drops: c.total_drops(),
            },
        )
    })
}
