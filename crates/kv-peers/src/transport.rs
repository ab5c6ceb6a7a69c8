//! The load generator's transport over kernel TCP: a few non-blocking connections per client
//! thread, requests pipelined on them round-robin, replies matched in order.

use crate::memcache;
use crate::plan::Plan;
use crate::server::Peer;
use loadgen::{ClientTransport, Response};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};

/// Bytes read from one connection per poll before moving on.
const READ_BUDGET: usize = 1 << 20;

enum Raw {
    Resp(resp::Value),
    Mc(memcache::Reply),
}

struct Pending {
    id: u64,
    /// Requests of the unit: `next..end` still to be answered.
    next: usize,
    end: usize,
    /// Replies each request of the unit produces, from the unit's first request.
    wants: Vec<usize>,
    start: usize,
    got: Vec<Raw>,
    payload: Vec<u8>,
}

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    pending: VecDeque<Pending>,
    broken: bool,
}

/// One client thread's connections to a peer.
pub struct PeerTransport<'p> {
    plan: &'p Plan,
    threads: usize,
    conns: Vec<Conn>,
    rr: usize,
    chunk: Vec<u8>,
}

impl<'p> PeerTransport<'p> {
    /// Opens `connections` TCP connections to `addr` (Nagle off, non-blocking).
    pub fn connect(
        plan: &'p Plan,
        addr: SocketAddr,
        connections: usize,
        threads: usize,
    ) -> io::Result<Self> {
        let mut conns = Vec::new();
        for _ in 0..connections.max(1) {
            let stream = TcpStream::connect(addr)?;
            stream.set_nodelay(true)?;
            stream.set_nonblocking(true)?;
            conns.push(Conn {
                stream,
                out: Vec::new(),
                out_pos: 0,
                inbuf: Vec::new(),
                pending: VecDeque::new(),
                broken: false,
            });
        }
        Ok(PeerTransport {
            plan,
            threads,
            conns,
            rr: 0,
            chunk: vec![0; 256 << 10],
        })
    }
}

fn flush(c: &mut Conn) -> io::Result<()> {
    while c.out_pos < c.out.len() {
        match c.stream.write(&c.out[c.out_pos..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "peer closed the connection",
                ))
            }
            Ok(n) => c.out_pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if c.out_pos == c.out.len() {
        c.out.clear();
        c.out_pos = 0;
    } else if c.out_pos > (1 << 20) {
        c.out.drain(..c.out_pos);
        c.out_pos = 0;
    }
    Ok(())
}

impl ClientTransport for PeerTransport<'_> {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        let n = self.conns.len();
        let Some(ci) = (0..n)
            .map(|k| (self.rr + k) % n)
            .find(|&i| !self.conns[i].broken)
        else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "every connection to the peer broke",
            ));
        };
        self.rr = (ci + 1) % n;
        let unit = self.plan.units[self.plan.unit_of(id, self.threads)].clone();
        let c = &mut self.conns[ci];
        let wants: Vec<usize> = unit
            .clone()
            .map(|i| self.plan.encode(i, &mut c.out))
            .collect();
        c.pending.push_back(Pending {
            id,
            next: unit.start,
            end: unit.end,
            wants,
            start: unit.start,
            got: Vec::new(),
            payload: Vec::new(),
        });
        if let Err(e) = flush(c) {
            c.broken = true;
            return Err(e);
        }
        Ok(())
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        let mut reported = 0;
        let mut first_err: Option<io::Error> = None;
        let plan = self.plan;
        for c in self.conns.iter_mut().filter(|c| !c.broken) {
            let res: io::Result<()> = (|| {
                flush(c)?;
                let mut read = 0;
                while read < READ_BUDGET {
                    match c.stream.read(&mut self.chunk) {
                        Ok(0) => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "peer closed the connection",
                            ))
                        }
                        Ok(k) => {
                            c.inbuf.extend_from_slice(&self.chunk[..k]);
                            read += k;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                let mut pos = 0;
                loop {
                    let parsed = match plan.peer {
                        Peer::Redis => resp::parse(&c.inbuf[pos..])
                            .map(|o| o.map(|(v, n)| (Raw::Resp(v), n)))
                            .map_err(|e| e.to_string()),
                        Peer::Memcached => memcache::parse(&c.inbuf[pos..])
                            .map(|o| o.map(|(v, n)| (Raw::Mc(v), n)))
                            .map_err(|e| e.to_string()),
                    };
                    let (raw, n) = match parsed {
                        Ok(Some(x)) => x,
                        Ok(None) => break,
                        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
                    };
                    pos += n;
                    let Some(p) = c.pending.front_mut() else {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "a reply to no request",
                        ));
                    };
                    p.got.push(raw);
                    if p.got.len() < p.wants[p.next - p.start] {
                        continue;
                    }
                    let got = std::mem::take(&mut p.got);
                    match plan.peer {
                        Peer::Redis => {
                            let v: Vec<resp::Value> = got
                                .into_iter()
                                .filter_map(|r| if let Raw::Resp(v) = r { Some(v) } else { None })
                                .collect();
                            plan.reduce_resp(p.next, &v, &mut p.payload);
                        }
                        Peer::Memcached => {
                            let v: Vec<memcache::Reply> = got
                                .into_iter()
                                .filter_map(|r| if let Raw::Mc(v) = r { Some(v) } else { None })
                                .collect();
                            plan.reduce_memcache(p.next, &v, &mut p.payload);
                        }
                    }
                    p.next += 1;
                    if p.next < p.end {
                        continue;
                    }
                    let done = c.pending.pop_front().expect("front exists");
                    on_response(Response {
                        id: Some(done.id),
                        payload: &done.payload,
                    });
                    reported += 1;
                }
                c.inbuf.drain(..pos);
                Ok(())
            })();
            if let Err(e) = res {
                // The stream is out of step or gone: stop using it; its requests time out.
                c.broken = true;
                c.pending.clear();
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) if reported == 0 => Err(e),
            _ => Ok(reported),
        }
    }
}
