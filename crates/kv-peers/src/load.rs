//! Loading a peer with a workload's initial contents, over one pipelined connection.

use crate::memcache;
use crate::plan::Layout;
use crate::server::Peer;
use kv_workloads::Workload;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Commands in flight before their replies are read.
const BATCH: usize = 256;
/// List elements per `RPUSH`.
const PUSH_CHUNK: usize = 64;

/// What a load put in the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Keys loaded.
    pub keys: u64,
    /// Value bytes loaded.
    pub bytes: u64,
}

/// One parsed load reply: accepted or refused (why), and the bytes it took.
type Parsed = Option<(Result<(), String>, usize)>;

struct Pipe {
    peer: Peer,
    stream: TcpStream,
    out: Vec<u8>,
    queued: usize,
    inbuf: Vec<u8>,
}

impl Pipe {
    fn drain(&mut self) -> io::Result<()> {
        self.stream.write_all(&self.out)?;
        self.out.clear();
        let mut chunk = vec![0u8; 64 << 10];
        while self.queued > 0 {
            let parsed: Result<Parsed, String> = match self.peer {
                Peer::Redis => resp::parse(&self.inbuf)
                    .map_err(|e| e.to_string())
                    .map(|o| {
                        o.map(|(v, n)| match v {
                            resp::Value::Error(e) => {
                                (Err(String::from_utf8_lossy(&e).into_owned()), n)
                            }
                            _ => (Ok(()), n),
                        })
                    }),
                Peer::Memcached => {
                    memcache::parse(&self.inbuf)
                        .map_err(|e| e.to_string())
                        .map(|o| {
                            o.map(|(v, n)| match v {
                                memcache::Reply::Status(s) if s == "STORED" || s == "OK" => {
                                    (Ok(()), n)
                                }
                                other => (Err(format!("{other:?}")), n),
                            })
                        })
                }
            };
            match parsed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))? {
                Some((Ok(()), n)) => {
                    self.inbuf.drain(..n);
                    self.queued -= 1;
                }
                Some((Err(e), _)) => {
                    return Err(io::Error::other(format!(
                        "{} refused a load command: {e}",
                        self.peer.binary()
                    )))
                }
                None => {
                    let k = self.stream.read(&mut chunk)?;
                    if k == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "server closed the connection",
                        ));
                    }
                    self.inbuf.extend_from_slice(&chunk[..k]);
                }
            }
        }
        Ok(())
    }

    fn queued(&mut self) -> io::Result<()> {
        self.queued += 1;
        if self.queued >= BATCH || self.out.len() > (4 << 20) {
            self.drain()?;
        }
        Ok(())
    }
}

/// Empties the server and loads `workload`'s initial contents in `layout`.
pub fn load(
    peer: Peer,
    addr: SocketAddr,
    workload: &dyn Workload,
    layout: Layout,
) -> io::Result<Loaded> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut p = Pipe {
        peer,
        stream,
        out: Vec::new(),
        queued: 0,
        inbuf: Vec::new(),
    };
    match peer {
        Peer::Redis => resp::Out::command(&mut p.out, &[b"FLUSHALL"]),
        Peer::Memcached => p.out.extend_from_slice(b"flush_all\r\n"),
    }
    p.queued()?;
    let mut loaded = Loaded::default();
    let bad =
        |e: memcache::ProtocolError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    for (key, vals) in workload.load() {
        loaded.keys += 1;
        loaded.bytes += vals.iter().map(|v| v.len() as u64).sum::<u64>();
        match (peer, layout) {
            (Peer::Redis, Layout::Strings) => {
                resp::Out::command(&mut p.out, &[b"SET", key.as_bytes(), &vals.concat()]);
                p.queued()?;
            }
            (Peer::Redis, Layout::Lists) => {
                for chunk in vals.chunks(PUSH_CHUNK) {
                    let mut args: Vec<&[u8]> = vec![b"RPUSH", key.as_bytes()];
                    args.extend(chunk.iter().map(Vec::as_slice));
                    resp::Out::command(&mut p.out, &args);
                    p.queued()?;
                }
            }
            (Peer::Memcached, Layout::Strings) => {
                memcache::encode_store(&mut p.out, "set", key.as_bytes(), &vals.concat())
                    .map_err(bad)?;
                p.queued()?;
            }
            (Peer::Memcached, Layout::Lists) => {
                for (j, v) in vals.iter().enumerate() {
                    memcache::encode_store(&mut p.out, "set", format!("{key}/{j}").as_bytes(), v)
                        .map_err(bad)?;
                    p.queued()?;
                }
            }
        }
    }
    p.drain()?;
    Ok(loaded)
}
