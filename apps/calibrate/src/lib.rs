//! The copy-threshold calibration of the Cornflakes paper (§5; docs/calibration.md): when is
//! it cheaper to send a field by reference (a scatter-gather entry) than to copy it?
//!
//! - [`server`]: the calibration server, one [`app_server::Handler`] — the same handler runs
//!   on every datapath `app_server::launch` opens (socket, AF_XDP, mlx5, ice) and on the
//!   emulated ConnectX — and its client.
//! - [`run`]: `calibrate run` — per segment size S and count K, the saturation load of copy
//!   and of scatter-gather, the heatmap and the recommended threshold.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod run;
pub mod server;

/// The reply message generated from `schemas/calibrate.proto` by `cornflakes-codegen`
/// (build.rs).
#[allow(missing_docs)]
pub mod schema {
    cornflakes::include_schema!("calibrate");
}
