//! With the `xdp` feature: compiles `bpf/cf_xdp.c` to a BPF object in `OUT_DIR` (embedded by
//! `src/bpf.rs`, which also links libbpf). Without it: nothing (the crate is pure logic and docs).

use std::env;
use std::io;
use std::path::PathBuf;
use std::process::Command;

fn main() -> io::Result<()> {
    println!("cargo:rerun-if-changed=bpf/cf_xdp.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    if env::var_os("CARGO_FEATURE_XDP").is_none() {
        return Ok(());
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("cf_xdp.o");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        other => other,
    };
    let candidates: Vec<String> = match env::var("CLANG") {
        Ok(c) => vec![c],
        Err(_) => vec!["clang-14".into(), "clang".into()],
    };
    let mut last_err = None;
    for clang in &candidates {
        let status = Command::new(clang)
            .args(["-O2", "-g", "-Wall", "-target", "bpf"])
            .arg(format!("-I/usr/include/{multiarch}"))
            .arg("-c")
            .arg("bpf/cf_xdp.c")
            .arg("-o")
            .arg(&obj)
            .status();
        match status {
            // libbpf itself is linked by the `#[link(name = "bpf")]` block in src/bpf.rs.
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => {
                return Err(io::Error::other(format!(
                    "{clang} failed ({s}) compiling bpf/cf_xdp.c; install the packages in \
                     crates/datapath-xdp/APT_PACKAGES"
                )))
            }
            Err(e) => last_err = Some((clang.clone(), e)),
        }
    }
    let (clang, e) = last_err.expect("at least one candidate");
    Err(io::Error::new(
        e.kind(),
        format!(
            "the `xdp` feature needs clang with the BPF target to build bpf/cf_xdp.c, but \
             running `{clang}` failed: {e}. Install the packages listed in \
             crates/datapath-xdp/APT_PACKAGES (apt-get install $(cat APT_PACKAGES)) or set CLANG."
        ),
    ))
}
