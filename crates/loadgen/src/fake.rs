//! An in-memory echo "network" with deterministic faults, for tests.
//!
//! [`FakeEchoServer`] runs a thread that echoes every request back to the
//! client that sent it, except that it drops every `drop_every`-th request
//! and flips a byte in every `corrupt_every`-th one (counting requests in the
//! order the server sees them; a request chosen for both is dropped). The
//! expected number of losses and mismatches is therefore known exactly, which
//! lets tests prove the load generator counts each kind correctly.
//!
//! Request payloads are [`payload_for`]`(id)`; [`check_echo`] is the matching
//! [`ResponseChecker`](crate::ResponseChecker).

use crate::transport::{ClientTransport, Response};
use std::io;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;

/// Length of every fake request payload.
pub const PAYLOAD_LEN: usize = 32;

/// Which requests the fake server mistreats (0 disables a fault).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Drop every n-th request (no response at all).
    pub drop_every: u64,
    /// Corrupt one payload byte of every n-th response.
    pub corrupt_every: u64,
}

impl FaultPlan {
    /// Number of `(dropped, corrupted)` requests out of the first `n`.
    pub fn expected_faults(&self, n: u64) -> (u64, u64) {
        let hits = |every: u64| n.checked_div(every).unwrap_or(0);
        let dropped = hits(self.drop_every);
        let both = if self.drop_every == 0 || self.corrupt_every == 0 {
            0
        } else {
            n / lcm(self.drop_every, self.corrupt_every)
        };
        (dropped, hits(self.corrupt_every) - both)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// The deterministic payload of request `id`.
pub fn payload_for(id: u64) -> [u8; PAYLOAD_LEN] {
    let mut p = [0u8; PAYLOAD_LEN];
    let mut x = id ^ 0x5851_f42d_4c95_7f2d;
    for chunk in p.chunks_mut(8) {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    p
}

/// Checker for the fake echo: the response must equal the request payload.
pub fn check_echo(id: u64, payload: &[u8]) -> bool {
    payload == payload_for(id)
}

type Reply = (u64, Vec<u8>);

struct Request {
    id: u64,
    payload: Vec<u8>,
    reply_to: Sender<Reply>,
}

/// An echo server thread reached through in-memory channels.
pub struct FakeEchoServer {
    requests: Option<Sender<Request>>,
    thread: Option<JoinHandle<u64>>,
}

impl FakeEchoServer {
    /// Starts the server thread with the given faults.
    pub fn start(plan: FaultPlan) -> Self {
        let (tx, rx) = channel::<Request>();
        let thread = std::thread::spawn(move || {
            let mut seen = 0u64;
            for mut req in rx {
                seen += 1;
                let hit = |every: u64| every != 0 && seen.is_multiple_of(every);
                if hit(plan.drop_every) {
                    continue;
                }
                if hit(plan.corrupt_every) {
                    if let Some(b) = req.payload.last_mut() {
                        *b ^= 0xff;
                    }
                }
                // A client that already finished is not an error for a server.
                let _ = req.reply_to.send((req.id, req.payload));
            }
            seen
        });
        FakeEchoServer {
            requests: Some(tx),
            thread: Some(thread),
        }
    }

    /// A new client transport connected to this server.
    pub fn connect(&self) -> io::Result<FakeTransport> {
        let to_server = self
            .requests
            .clone()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "server stopped"))?;
        let (reply_to, replies) = channel();
        Ok(FakeTransport {
            to_server,
            reply_to,
            replies,
        })
    }

    /// Stops the server once every transport is gone and returns how many
    /// requests it saw.
    pub fn stop(mut self) -> u64 {
        self.shutdown()
    }

    fn shutdown(&mut self) -> u64 {
        self.requests = None;
        self.thread
            .take()
            .map(|t| t.join().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Drop for FakeEchoServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Client side of [`FakeEchoServer`]; sends [`payload_for`]`(id)`.
pub struct FakeTransport {
    to_server: Sender<Request>,
    reply_to: Sender<Reply>,
    replies: Receiver<Reply>,
}

impl ClientTransport for FakeTransport {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        let req = Request {
            id,
            payload: payload_for(id).to_vec(),
            reply_to: self.reply_to.clone(),
        };
        self.to_server
            .send(req)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "fake server stopped"))
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        let mut n = 0;
        loop {
            match self.replies.try_recv() {
                Ok((id, payload)) => {
                    on_response(Response {
                        id: Some(id),
                        payload: &payload,
                    });
                    n += 1;
                }
                // `Disconnected` cannot happen while we hold `reply_to`.
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return Ok(n),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_faults_counts_overlap_once() {
        let plan = FaultPlan {
            drop_every: 10,
            corrupt_every: 4,
        };
        // 100 requests: drops at 10,20..100 (10); corrupt at 4,8..100 (25),
        // of which 20,40,60,80,100 are dropped instead.
        assert_eq!(plan.expected_faults(100), (10, 20));
        assert_eq!(FaultPlan::default().expected_faults(100), (0, 0));
    }

    #[test]
    fn server_echoes_and_applies_faults() {
        let server = FakeEchoServer::start(FaultPlan {
            drop_every: 3,
            corrupt_every: 2,
        });
        let mut t = server.connect().unwrap();
        for id in 1..=6 {
            t.send_request(id).unwrap();
        }
        let mut got = Vec::new();
        // Bounded so a broken server fails the test instead of hanging it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while got.len() < 4 && std::time::Instant::now() < deadline {
            t.poll_responses(&mut |r| {
                got.push((r.id.unwrap(), check_echo(r.id.unwrap(), r.payload)))
            })
            .unwrap();
            std::thread::yield_now();
        }
        // Requests 3 and 6 dropped; 2 and 4 corrupted.
        assert_eq!(got, vec![(1, true), (2, false), (4, false), (5, true)]);
        drop(t);
        assert_eq!(server.stop(), 6);
    }
}
