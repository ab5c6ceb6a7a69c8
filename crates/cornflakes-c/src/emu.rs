//! `cf_dp_emu_new`, the emulated ConnectX from C. Every build has the function; the device
//! itself (its clients, reply checks and saturation search: the load generator) is linked only
//! with the cargo feature `emu` ([`crate::emu_arm`]), so the default library carries none of it
//! and returns `CF_ERR_UNSUPPORTED`, saying how to build it.

use std::path::PathBuf;

use crate::error::{cf_status, cstr, guard, Error};
use crate::table::cf_dp;

/// Opens the ConnectX datapath (the real mlx5 driver) against an emulated ConnectX that runs
/// on another CPU of this process and plays the wire and open-loop clients. `dir` is the
/// run's directory: the device starts when a bench writes `DIR/plan.json` (the requests to
/// inject, how to check each reply, and the load or the saturation search to run; format in
/// docs/c-api.md), and the report is written to `DIR/report.json` when the plan is done
/// (then `DIR/done`, holding `ok` or the error). Needs two CPUs: the calling thread is
/// pinned to the first this process may use (serve on it), the device to the last. The
/// pinned memory holds items up to 64 KiB and is registered with each trial's device.
/// No file descriptor: poll `cf_dp_recv` (it finds nothing until a trial starts).
///
/// Needs the library built with `--features emu`; without it, `CF_ERR_UNSUPPORTED`.
#[no_mangle]
pub extern "C" fn cf_dp_emu_new(dir: *const std::ffi::c_char, out_dp: *mut cf_dp) -> cf_status {
    guard("cf_dp_emu_new", || {
        let dir = PathBuf::from(cstr(dir, "dir")?);
        if !dir.is_dir() {
            return Err(Error::invalid(format!(
                "{} is not a directory (the emulated device's run directory)",
                dir.display()
            )));
        }
        open(dir, out_dp)
    })
}

#[cfg(feature = "emu")]
fn open(dir: PathBuf, out_dp: *mut cf_dp) -> crate::error::Result<()> {
    let dp = crate::emu_arm::open(dir)?;
    crate::error::out(out_dp, "out_dp", crate::dp::insert_dp(dp)?)
}

#[cfg(not(feature = "emu"))]
fn open(_: PathBuf, _: *mut cf_dp) -> crate::error::Result<()> {
    Err(Error::new(
        cf_status::CF_ERR_UNSUPPORTED,
        "this library was built without the emulated ConnectX: rebuild it with `cargo build \
         --release -p cornflakes-c --features emu` (no system packages needed)",
    ))
}
