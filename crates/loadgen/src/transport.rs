//! The boundary between the load generator and a datapath.
//!
//! A transport only has to do two things: put request `id` on the wire, and
//! hand back whatever responses have arrived, without blocking. How requests
//! are built (copied, serialized, scatter-gathered) and where responses live
//! (a socket buffer, a NIC RX ring) stays inside the transport: responses are
//! lent to the load generator as borrowed slices, so no copy is needed.
//!
//! Checking that a response is *correct* is the job of a caller-supplied
//! [`ResponseChecker`]; the load generator counts wrong answers separately
//! from lost ones.

use std::io;

/// One response as reported by a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    /// Request id the response claims to answer, exactly as given to
    /// [`ClientTransport::send_request`], or `None` when the transport could
    /// not read an id out of it (counted as malformed).
    pub id: Option<u64>,
    /// The response payload handed to the checker. Its meaning is defined by
    /// the transport and the checker together (e.g. a serialized message).
    pub payload: &'a [u8],
}

/// Client side of a datapath, driven by one load-generator thread.
///
/// Each client thread owns its own transport, so implementations need no
/// locking. Both methods must not block for long: the load generator calls
/// them in a loop between scheduled sends.
pub trait ClientTransport {
    /// Sends the request with this id. The transport decides the content,
    /// typically deriving it from `id` so a checker can recompute it, and
    /// must carry the full 64-bit id (see [`crate::request_id`]) so the
    /// response can be reported under the same id.
    ///
    /// An error is counted as a send error and the request is not tracked.
    fn send_request(&mut self, id: u64) -> io::Result<()>;

    /// Reports every response that has arrived since the last call by calling
    /// `on_response` once per response, and returns how many were reported.
    /// Returns `Ok(0)` when nothing is pending.
    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize>;
}

impl<T: ClientTransport + ?Sized> ClientTransport for &mut T {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        (**self).send_request(id)
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        (**self).poll_responses(on_response)
    }
}

impl<T: ClientTransport + ?Sized> ClientTransport for Box<T> {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        (**self).send_request(id)
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        (**self).poll_responses(on_response)
    }
}

/// Decides whether a response payload is the correct answer to request `id`.
///
/// Shared by all client threads, hence `Sync`. Any `Fn(u64, &[u8]) -> bool`
/// closure that is `Sync` is a checker.
pub trait ResponseChecker: Sync {
    /// Returns true when `payload` is exactly what request `id` should get.
    fn check(&self, id: u64, payload: &[u8]) -> bool;
}

impl<F> ResponseChecker for F
where
    F: Fn(u64, &[u8]) -> bool + Sync,
{
    fn check(&self, id: u64, payload: &[u8]) -> bool {
        self(id, payload)
    }
}
