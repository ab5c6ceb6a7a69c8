//! Rewrites `src/generated/` from `schemas/` (protoc, capnp and flatc
//! 25.12.19 must be installed; see the crate README).
//!
//! `cargo run -p baselines-regen`

use baselines_regen as regen;

use std::process::ExitCode;

fn run() -> Result<(), String> {
    regen::check_tools().map_err(|e| e.0)?;
    let scratch = regen::scratch_dir("regen")?;
    regen::generate(&scratch)?;
    let target = regen::generated_dir();
    let old = regen::read_tree(&target)?;
    let new = regen::read_tree(&scratch)?;
    let changed = regen::differences(&new, &old);
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .map_err(|e| format!("removing {}: {e}", target.display()))?;
    }
    for (rel, bytes) in &new {
        let p = target.join(rel);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        std::fs::write(&p, bytes).map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if changed.is_empty() {
        println!("src/generated is up to date ({} files)", new.len());
    } else {
        println!("rewrote src/generated:");
        for c in changed {
            println!("  {c}");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
