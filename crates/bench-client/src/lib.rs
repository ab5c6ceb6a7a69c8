//! The client side of the apps' load generators: what every app's
//! [`loadgen::ClientTransport`] over a Cornflakes datapath does the same way (echo, KV,
//! calibration). Each app keeps only how it builds a request and reads a reply.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io;
use std::net::SocketAddrV4;

use cornflakes::{ConnId, Datapath, RxMsg, SendError};

mod cores;
pub use cores::{BypassClients, CoreClient, RESOLVE_TIMEOUT};
use datapath_tcp::TcpDatapath;
use loadgen::{request_id, Response};

/// Pushes queued requests out and reaps completions. A full queue is not an error: what is
/// still queued goes out at the next flush.
pub fn flush<D: Datapath>(dp: &mut D) -> io::Result<()> {
    let r = match dp.flush() {
        Ok(()) | Err(SendError::Full) => Ok(()),
        Err(e) => Err(io::Error::other(e.to_string())),
    };
    dp.poll_completions();
    r
}

/// Queues one request with `send`; when the queue is full, flushes once and tries again.
pub fn send_or_flush<D: Datapath>(
    dp: &mut D,
    mut send: impl FnMut(&mut D) -> Result<(), SendError>,
) -> io::Result<()> {
    let mut r = send(dp);
    if let Err(SendError::Full) = r {
        flush(dp)?;
        r = send(dp);
    }
    r.map_err(|e| io::Error::other(e.to_string()))
}

/// [`loadgen::ClientTransport::poll_responses`] of a client thread `thread` whose replies
/// carry their request's sequence number as the message id: flushes, receives one burst into
/// `rx` and hands each reply on with its full request id. Returns the replies received.
pub fn poll_replies<D: Datapath>(
    dp: &mut D,
    rx: &mut Vec<RxMsg>,
    thread: usize,
    on_response: &mut dyn FnMut(Response<'_>),
) -> io::Result<usize> {
    poll_replies_from(dp, rx, thread, 0, on_response)
}

/// [`poll_replies`] for requests whose message ids count from `base` (sequence number `seq`
/// sent as `base + seq`, wrapping).
pub fn poll_replies_from<D: Datapath>(
    dp: &mut D,
    rx: &mut Vec<RxMsg>,
    thread: usize,
    base: u32,
    on_response: &mut dyn FnMut(Response<'_>),
) -> io::Result<usize> {
    flush(dp)?;
    rx.clear();
    dp.recv_burst(rx)?;
    for m in rx.iter() {
        let seq = m.msg.id.wrapping_sub(base);
        on_response(Response {
            id: Some(request_id(thread, u64::from(seq))),
            payload: &m.data,
        });
    }
    let n = rx.len();
    rx.clear();
    Ok(n)
}

/// Waits until every connection of `conns` is resolved ([`cornflakes::datapath::Connect::resolved`]:
/// on a link-layer datapath, its peer answered ARP), receiving meanwhile so the answers are
/// processed; what arrives is dropped. An error naming the peers still unresolved after
/// `timeout` (a wrong server address, a missing neighbour, a link that is down).
pub fn wait_resolved<D: Datapath>(
    dp: &mut D,
    conns: &[ConnId],
    timeout: std::time::Duration,
) -> io::Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    let mut rx = Vec::new();
    loop {
        let pending: Vec<ConnId> = conns.iter().copied().filter(|c| !dp.resolved(*c)).collect();
        if pending.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            let peers: Vec<String> = pending
                .iter()
                .map(|c| {
                    dp.peer_addr(*c)
                        .map_or("?".to_owned(), |p| p.ip().to_string())
                })
                .collect();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no ARP answer from {} within {timeout:?} (check the server's address, the link, or give its MAC with --peer IP=MAC)",
                    peers.join(", ")
                ),
            ));
        }
        flush(dp)?;
        rx.clear();
        dp.recv_burst(&mut rx)?;
        rx.clear();
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Opens `per_core` (at least 1) kernel-TCP connections to each server core in `cores`:
/// connection *k* goes to core *k* mod N, so spreading requests over the connections by
/// sequence number keeps them round-robin over the cores.
pub fn tcp_conns(
    dp: &mut TcpDatapath,
    cores: &[SocketAddrV4],
    per_core: usize,
) -> io::Result<Vec<ConnId>> {
    let mut conns = Vec::with_capacity(cores.len() * per_core.max(1));
    for _ in 0..per_core.max(1) {
        for &c in cores {
            conns.push(dp.open(c)?);
        }
    }
    Ok(conns)
}

/// One client core of a load generator that keeps its datapath across runs (a kernel-bypass
/// NIC queue): connects `dp` to every server core in `servers`, waits for their ARP answers
/// ([`wait_resolved`], up to `resolve`), calls `ready`, then runs each load point `member` is
/// handed with a transport `client` builds over the datapath and the connections (a fresh one
/// per point: its own request identities), taking the datapath back with `datapath` after the
/// point. Before each point, what is still arriving from the last one is received and dropped.
/// Returns when the crew is dropped.
pub fn client_core<D: Datapath, T: loadgen::ClientTransport>(
    mut dp: D,
    servers: &[SocketAddrV4],
    member: loadgen::Member,
    resolve: std::time::Duration,
    ready: impl FnOnce(),
    mut client: impl FnMut(D, &[ConnId]) -> io::Result<T>,
    mut datapath: impl FnMut(T) -> D,
) -> Result<(), String> {
    let i = member.index();
    let conns = dp
        .connect_all(servers)
        .map_err(|e| format!("client core {i}: {e}"))?;
    wait_resolved(&mut dp, &conns, resolve).map_err(|e| format!("client core {i}: {e}"))?;
    ready();
    let mut rx = Vec::new();
    let mut dp = Some(dp);
    while let Some(job) = member.next_job() {
        let Some(mut d) = dp.take() else {
            job.fail(io::Error::other("the datapath was lost"));
            continue;
        };
        // Late replies of the last point, so none is taken for this one's.
        while d.recv_burst(&mut rx).map_err(|e| e.to_string())? > 0 {
            rx.clear();
        }
        rx.clear();
        match client(d, &conns) {
            Ok(c) => dp = Some(datapath(job.run(c))),
            Err(e) => return Err(format!("client core {i}: {}", job.fail(e))),
        }
    }
    Ok(())
}

/// The crew members of a load generator's client cores, each taken once by its core (core *i*
/// takes member *i*) from the body all cores share.
#[derive(Debug)]
pub struct Members(std::sync::Mutex<Vec<Option<loadgen::Member>>>);

impl Members {
    /// The members, core *i*'s at index *i*.
    pub fn new(members: Vec<loadgen::Member>) -> Members {
        Members(std::sync::Mutex::new(
            members.into_iter().map(Some).collect(),
        ))
    }

    /// Core `i`'s member; an error when there is none or it was taken.
    pub fn take(&self, i: usize) -> Result<loadgen::Member, String> {
        self.0
            .lock()
            .map_err(|_| "client cores: a core panicked".to_owned())?
            .get_mut(i)
            .and_then(Option::take)
            .ok_or_else(|| format!("client core {i}: no crew member"))
    }
}
