//! # cornflakes-rpc
//!
//! The runtime of services generated from `.proto` files (`cornflakes-codegen`): what a
//! generated server and client need above the datapath interface (`cornflakes::datapath`) and
//! the object runtime, and nothing of the load generators, the baselines or the NIC
//! launchers. See `docs/codegen.md`, "Services".
//!
//! - [`Server`]: the server skeleton, a datapath queue and a [`Handler`] (what it runs for
//!   each request), with its counters ([`ServerStats`]); [`Tx`] is the datapath a handler
//!   sends on (a send that meets a full queue is made again with the built reply).
//! - [`Cornflakes`] and [`SendPath`]: how a server's replies are built and handed to the
//!   datapath (hybrid, all scatter-gather, all copy, no serialize-and-send).
//! - [`Dispatcher`] and [`Reply`]: the state of a generated dispatcher and the handle a
//!   method answers through; [`RpcError`]: the error reply to a method the service does not
//!   have.
//! - [`Client`]: a generated client's runtime: `call` (timeout, retries under the same id)
//!   and the open-loop `send` / `poll` with a bounded table of outstanding ids;
//!   [`Interleaved`] runs an in-process server before each of a client's receives.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod dispatch;
mod handler;
pub mod ids;
mod interleave;
pub mod once;
mod outstanding;
mod rpc_error;
mod send;
mod server;
mod stats;
mod tx;

pub use client::{
    check_reply, CallError, Client, ClientStats, ReplyView, Response, RetryPolicy,
    DEFAULT_OUTSTANDING,
};
pub use dispatch::{
    Dispatcher, Keep, Kept, KeptReply, Plain, Replied, Reply, RpcCounters, KEPT_REPLY_LEN,
};
pub use handler::{CoreId, Handler, Make, Unanswered, WORK_SAMPLE_EVERY};
pub use ids::ClientIds;
pub use interleave::Interleaved;
pub use once::{OnceStats, OnceTable};
pub use rpc_error::{ErrorCode, RpcError, ERROR_TYPE};
pub use send::{Cornflakes, SendPath};
pub use server::Server;
pub use stats::{AppCounters, ServerStats};
pub use tx::{Tx, TxCounters};
