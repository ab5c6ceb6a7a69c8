//! `cornflakes/options.proto`: the method options the generator reads (a method's number,
//! exactly-once), shipped with the crate so a schema can import it without vendoring it.

use std::path::PathBuf;

/// The import path of the shipped options file.
pub const OPTIONS_PROTO_PATH: &str = "cornflakes/options.proto";

/// The text of `cornflakes/options.proto`.
pub const OPTIONS_PROTO: &str = include_str!("../proto/cornflakes/options.proto");

/// A directory holding the shipped `cornflakes/options.proto` (for a load that imports it and
/// whose include directories do not have it), and the file written: under `$OUT_DIR` in a
/// build script, else under the system's temporary directory, once per version and atomically
/// (build scripts run in parallel).
pub(crate) fn shipped_dir() -> Result<PathBuf, (PathBuf, std::io::Error)> {
    let base = std::env::var_os("OUT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("cornflakes-codegen-{}", env!("CARGO_PKG_VERSION")));
    let file = dir.join(OPTIONS_PROTO_PATH);
    if std::fs::read(&file).is_ok_and(|old| old == OPTIONS_PROTO.as_bytes()) {
        return Ok(dir);
    }
    let parent = file.parent().unwrap_or(&dir).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| (parent.clone(), e))?;
    let tmp = parent.join(format!("options.proto.{}.tmp", std::process::id()));
    std::fs::write(&tmp, OPTIONS_PROTO).map_err(|e| (tmp.clone(), e))?;
    std::fs::rename(&tmp, &file).map_err(|e| (file.clone(), e))?;
    Ok(dir)
}
