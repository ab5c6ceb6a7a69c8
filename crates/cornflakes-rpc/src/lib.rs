//! # cornflakes-rpc
//!
//! The runtime of services generated from `.proto` files (`cornflakes-codegen`): what a
//! generated server and client need above the datapath interface (`cornflakes::datapath`) and
//! the object runtime, and nothing of the load generators, the baselines or the NIC
//! launchers. See `docs/codegen.md`, "Services".
//!
//! - [`Handler`]: what the server skeleton runs for each request; [`Tx`] is the datapath a
//!   handler sends on (a send that meets a full queue is made again with the built reply).
//! - [`Cornflakes`] and [`SendPath`]: how a server's replies are built and handed to the
//!   datapath (hybrid, all scatter-gather, all copy, no serialize-and-send).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod handler;
mod send;
mod tx;

pub use handler::{AppCounters, CoreId, Handler, Make, Unanswered, WORK_SAMPLE_EVERY};
pub use send::{Cornflakes, SendPath};
pub use tx::{Tx, TxCounters};
