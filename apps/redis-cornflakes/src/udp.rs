//! The load generator's transport to redis-cornflakes over the Cornflakes UDP stack (the
//! socket datapath): each request one message, in RESP or as a `kv.proto` object, and each
//! reply reduced to the same verdict payload kv-peers checks for the stock redis-server, so
//! every reply of every system is verified the same way.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{Arena, CFBytes, CFString, ConnId, Msg, RxMsg, SendError};
use datapath_socket::{SocketConfig, SocketDatapath};
use kv_peers::plan::Plan;
use kv_workloads::{OpKind, Request};
use loadgen::{ClientTransport, Response};
use resp::Value as V;

/// The largest message either side sends (the server's CF_MAX_MESSAGE).
const MAX_MESSAGE: usize = 256 << 10;

/// How the server's Cornflakes port speaks (its `cornflakes-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// RESP requests and replies (Redis's own serialization), one per message.
    Resp,
    /// `kv.proto` objects; long values are sent by reference.
    Cornflakes,
}

impl Format {
    /// The server's `cornflakes-format` value.
    pub fn name(self) -> &'static str {
        match self {
            Format::Resp => "resp",
            Format::Cornflakes => "cornflakes",
        }
    }
}

/// The KV store's messages (`schemas/kv.proto`, compiled by build.rs).
pub(crate) mod kv {
    cornflakes::include_schema!("kv");
}

/// One client thread's datapath to the server.
pub struct UdpTransport<'p> {
    plan: &'p Plan,
    threads: usize,
    format: Format,
    dp: SocketDatapath,
    conn: ConnId,
    next: u32,
    /// message id → (load-generator id, request index)
    pending: HashMap<u32, (u64, usize)>,
    arena: Arena,
    rx: Vec<RxMsg>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn send_err(e: SendError) -> io::Error {
    other(e)
}

impl<'p> UdpTransport<'p> {
    /// A datapath on 127.0.0.1 connected to the server's Cornflakes port.
    pub fn connect(
        plan: &'p Plan,
        server: SocketAddrV4,
        format: Format,
        threads: usize,
    ) -> io::Result<Self> {
        let mut cfg = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        // As the server (cornflakes.c, CF_MAX_MESSAGE): requests and replies up to 256 KiB.
        cfg.memory.max_item_size = MAX_MESSAGE;
        cfg.max_message_len = MAX_MESSAGE;
        let mut dp = SocketDatapath::new(cfg).map_err(other)?;
        let conn = dp.connect(server)?;
        let arena = Arena::with_memory(dp.memory());
        Ok(UdpTransport {
            plan,
            threads,
            format,
            dp,
            conn,
            next: 1,
            pending: HashMap::new(),
            arena,
            rx: Vec::new(),
            buf: Vec::new(),
            out: Vec::new(),
        })
    }

    fn send_object(&mut self, msg: Msg, r: &Request) -> Result<(), SendError> {
        let a = &self.arena;
        let id = msg.id;
        let res = match r {
            Request::Get { key } => {
                let mut m = kv::GetReq::new_in(a);
                m.set_id(id);
                m.set_key(CFString::new(key, a));
                self.dp.send_object(self.conn, msg, &m)
            }
            Request::Put { key, val } => {
                let mut m = kv::PutReq::new_in(a);
                m.set_id(id);
                m.set_key(CFString::new(key, a));
                m.set_val(CFBytes::new(val, a));
                self.dp.send_object(self.conn, msg, &m)
            }
            Request::GetM { keys } => {
                let mut m = kv::GetMReq::new_in(a);
                m.set_id(id);
                m.init_keys(keys.len());
                for k in keys {
                    m.get_mut_keys().append(CFString::new(k, a));
                }
                self.dp.send_object(self.conn, msg, &m)
            }
            Request::GetList { key } => {
                let mut m = kv::GetListReq::new_in(a);
                m.set_id(id);
                m.set_key(CFString::new(key, a));
                self.dp.send_object(self.conn, msg, &m)
            }
            Request::Append { key, val } => {
                let mut m = kv::AppendReq::new_in(a);
                m.set_id(id);
                m.set_key(CFString::new(key, a));
                m.set_val(CFBytes::new(val, a));
                self.dp.send_object(self.conn, msg, &m)
            }
            Request::Delete { key } => {
                let mut m = kv::DeleteReq::new_in(a);
                m.set_id(id);
                m.set_key(CFString::new(key, a));
                self.dp.send_object(self.conn, msg, &m)
            }
            Request::PutM { .. } | Request::GetFromList { .. } => {
                return Err(SendError::Io(other(format!(
                    "{} is not served by redis-cornflakes' object format",
                    r.kind()
                ))))
            }
        };
        self.arena.reset();
        res
    }
}

/// A bulk reply from an object's status and value.
fn bulk(status: Result<kv::Status, i32>, val: &[u8]) -> V {
    match status {
        Ok(kv::Status::Ok) => V::Bulk(Some(val.to_vec())),
        Ok(kv::Status::NotFound) => V::Bulk(None),
        s => V::Error(format!("status {s:?}").into_bytes()),
    }
}

/// The RESP value the stock server would have answered, from a decoded object reply.
fn object_reply(r: &Request, data: &cornflakes::RcBuf, arena: &Arena) -> Result<V, String> {
    let e = |e: cornflakes::DecodeError| e.to_string();
    Ok(match r {
        Request::Get { .. } => {
            let m = kv::GetResp::deserialize_rcbuf(data, arena).map_err(e)?;
            bulk(m.get_status(), m.get_val().as_bytes())
        }
        Request::GetM { .. } => {
            let m = kv::GetMResp::deserialize_rcbuf(data, arena).map_err(e)?;
            let vals = m.get_vals();
            let sts = m.get_statuses();
            if vals.len() != sts.len() {
                return Err("getm: values and statuses differ in number".into());
            }
            V::Array(Some(
                (0..vals.len())
                    .map(|i| {
                        let s = kv::Status::try_from(sts.get(i).unwrap_or(-1)).map_err(|_| -1);
                        bulk(s, vals.get(i).map_or(&[][..], |v| v.as_bytes()))
                    })
                    .collect(),
            ))
        }
        Request::GetList { .. } => {
            let m = kv::GetListResp::deserialize_rcbuf(data, arena).map_err(e)?;
            match m.get_status() {
                Ok(kv::Status::Ok) => V::Array(Some(
                    m.get_vals()
                        .iter()
                        .map(|v| V::Bulk(Some(v.as_bytes().to_vec())))
                        .collect(),
                )),
                Ok(kv::Status::NotFound) => V::Array(Some(Vec::new())),
                s => V::Error(format!("status {s:?}").into_bytes()),
            }
        }
        Request::Put { .. } => {
            let m = kv::PutResp::deserialize_rcbuf(data, arena).map_err(e)?;
            match m.get_status() {
                Ok(kv::Status::Ok) => V::Simple(b"OK".to_vec()),
                s => V::Error(format!("status {s:?}").into_bytes()),
            }
        }
        Request::Append { .. } | Request::Delete { .. } => {
            let s = if matches!(r, Request::Append { .. }) {
                kv::AppendResp::deserialize_rcbuf(data, arena)
                    .map_err(e)?
                    .get_status()
            } else {
                kv::DeleteResp::deserialize_rcbuf(data, arena)
                    .map_err(e)?
                    .get_status()
            };
            match s {
                Ok(kv::Status::Ok) => V::Integer(1),
                Ok(kv::Status::NotFound) => V::Integer(0),
                s => V::Error(format!("status {s:?}").into_bytes()),
            }
        }
        Request::PutM { .. } | Request::GetFromList { .. } => {
            return Err(format!("{} is not served", r.kind()))
        }
    })
}

impl ClientTransport for UdpTransport<'_> {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        let unit = self.plan.units[self.plan.unit_of(id, self.threads)].clone();
        if unit.len() != 1 {
            return Err(other(
                "redis-cornflakes runs workloads of one request per unit",
            ));
        }
        let i = unit.start;
        let r = &self.plan.requests[i];
        let seq = self.next;
        self.next = self.next.wrapping_add(1).max(1);
        let msg = Msg::new(seq, OpKind::of(r).msg_type());
        match self.format {
            Format::Resp => {
                self.buf.clear();
                if self.plan.encode(i, &mut self.buf) != 1 {
                    return Err(other(
                        "a request that needs several Redis commands (MULTI) cannot go in one message",
                    ));
                }
                self.dp
                    .send_copy(self.conn, msg, &self.buf)
                    .map_err(send_err)?;
            }
            Format::Cornflakes => self.send_object(msg, &r.clone()).map_err(send_err)?,
        }
        self.dp.flush().map_err(send_err)?;
        self.pending.insert(seq, (id, i));
        Ok(())
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        self.rx.clear();
        self.dp.recv_burst(&mut self.rx)?;
        let mut n = 0;
        for m in std::mem::take(&mut self.rx) {
            let Some((id, i)) = self.pending.remove(&m.msg.id) else {
                on_response(Response {
                    id: None,
                    payload: &[],
                });
                n += 1;
                continue;
            };
            let value = match self.format {
                Format::Resp => match resp::parse(&m.data) {
                    Ok(Some((v, used))) if used == m.data.len() => Ok(v),
                    Ok(_) => Err("an incomplete or over-long RESP reply".to_owned()),
                    Err(e) => Err(e.to_string()),
                },
                Format::Cornflakes => object_reply(&self.plan.requests[i], &m.data, &self.arena),
            };
            self.out.clear();
            let v = value.unwrap_or_else(|e| V::Error(e.into_bytes()));
            self.plan
                .reduce_resp(i, std::slice::from_ref(&v), &mut self.out);
            self.arena.reset();
            on_response(Response {
                id: Some(id),
                payload: &self.out,
            });
            n += 1;
        }
        Ok(n)
    }
}
