//! # cornflakes-rpc
//!
//! The runtime of services generated from `.proto` files (`cornflakes-codegen`): what a
//! generated server and client need above the datapath interface (`cornflakes::datapath`) and
//! the object runtime, and nothing of the load generators, the baselines or the NIC
//! launchers. See `docs/codegen.md`, "Services".

#![forbid(unsafe_code)]
#![warn(missing_docs)]
