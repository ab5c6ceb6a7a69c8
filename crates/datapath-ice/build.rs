//! With the `ice` feature: finds DPDK with `pkg-config libdpdk`, compiles the C shim
//! (`shim/cf_dpdk.c`, wrappers for DPDK's `static inline` functions) and generates bindings
//! with bindgen into `OUT_DIR/dpdk.rs`. Without it: nothing (the crate is pure logic).
//!
//! Linking: the shared libraries pkg-config names (`--libs`, which does not list the PMDs),
//! plus `rte_net_ring` (for `rte_eth_from_rings`) and `rte_net_af_packet`, and `rte_net_ice`
//! when present, so those drivers are in the process even when the EAL's plugin directory is
//! not scanned. Debian's EAL also loads every PMD from its plugin directory
//! (`/usr/lib/<triple>/dpdk/pmds-23.0`) at start; `-d` in the EAL arguments adds others.

use std::io;

fn main() -> io::Result<()> {
    println!("cargo:rerun-if-changed=shim/cf_dpdk.c");
    println!("cargo:rerun-if-changed=shim/cf_dpdk.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    #[cfg(feature = "ice")]
    dpdk::build()?;
    Ok(())
}

#[cfg(feature = "ice")]
mod dpdk {
    use std::env;
    use std::io;
    use std::path::PathBuf;
    use std::process::Command;

    fn pkg_config(args: &[&str]) -> io::Result<String> {
        let out = Command::new("pkg-config")
            .args(args)
            .arg("libdpdk")
            .output()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "the `ice` feature needs pkg-config and DPDK (libdpdk-dev): running \
                     pkg-config failed: {e}. Install crates/datapath-ice/APT_PACKAGES."
                    ),
                )
            })?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "`pkg-config {} libdpdk` failed ({}): {}. The `ice` feature needs DPDK 22.11 \
             (apt-get install libdpdk-dev, see crates/datapath-ice/APT_PACKAGES) or PKG_CONFIG_PATH \
             pointing at its libdpdk.pc.",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    pub(crate) fn build() -> io::Result<()> {
        let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        let cflags = pkg_config(&["--cflags"])?;
        let libs = pkg_config(&["--libs"])?;
        let libdir = pkg_config(&["--variable=libdir"])?;

        let mut includes = Vec::new();
        let mut defines = Vec::new();
        for f in cflags.split_whitespace() {
            if let Some(p) = f.strip_prefix("-I") {
                includes.push(p.to_string());
            } else if let Some(d) = f.strip_prefix("-D") {
                defines.push(d.to_string());
            }
        }

        let mut cc = cc::Build::new();
        cc.file("shim/cf_dpdk.c")
            .define("ALLOW_EXPERIMENTAL_API", None)
            .flag_if_supported("-march=corei7")
            .warnings(true);
        for i in &includes {
            cc.include(i);
        }
        for d in &defines {
            match d.split_once('=') {
                Some((k, v)) => cc.define(k, Some(v)),
                None => cc.define(d, None),
            };
        }
        cc.try_compile("cf_dpdk")
            .map_err(|e| io::Error::other(format!("compiling shim/cf_dpdk.c: {e}")))?;

        // The PMDs used here, by name, before the libraries pkg-config lists (which they need).
        println!("cargo:rustc-link-search=native={libdir}");
        for pmd in ["rte_net_ring", "rte_net_af_packet", "rte_net_ice"] {
            if PathBuf::from(&libdir).join(format!("lib{pmd}.so")).exists() {
                println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
                println!("cargo:rustc-link-lib=dylib={pmd}");
            } else if pmd == "rte_net_ring" {
                return Err(io::Error::other(format!(
                    "lib{pmd}.so not found in {libdir}; DPDK's net_ring driver is required"
                )));
            }
        }
        for f in libs.split_whitespace() {
            if let Some(l) = f.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={l}");
            } else if let Some(p) = f.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={p}");
            }
        }

        let mut b = bindgen::Builder::default()
            .header("shim/cf_dpdk.h")
            .clang_arg("-DALLOW_EXPERIMENTAL_API")
            .allowlist_function("cf_.*")
            .allowlist_function("rte_eal_init")
            .allowlist_function("rte_eal_cleanup")
            .allowlist_function("rte_eal_iova_mode")
            .allowlist_function("rte_eal_get_runtime_dir")
            .allowlist_function("rte_eal_hotplug_add")
            .allowlist_function("rte_eal_hotplug_remove")
            .allowlist_function("rte_strerror")
            .allowlist_function("rte_socket_id")
            .allowlist_function("rte_eth_dev_get_port_by_name")
            .allowlist_function("rte_eth_dev_start")
            .allowlist_function("rte_eth_dev_stop")
            .allowlist_function("rte_eth_dev_close")
            .allowlist_function("rte_eth_dev_socket_id")
            .allowlist_function("rte_eth_promiscuous_enable")
            .allowlist_function("rte_eth_tx_done_cleanup")
            .allowlist_function("rte_eth_from_rings")
            .allowlist_function("rte_ring_create")
            .allowlist_function("rte_ring_free")
            .allowlist_function("rte_pktmbuf_pool_create")
            .allowlist_function("rte_pktmbuf_pool_create_extbuf")
            .allowlist_function("rte_mempool_free")
            .allowlist_function("rte_mempool_avail_count")
            .allowlist_function("rte_mempool_in_use_count")
            .allowlist_function("rte_extmem_register")
            .allowlist_function("rte_extmem_unregister")
            .allowlist_function("rte_dev_dma_map")
            .allowlist_function("rte_dev_dma_unmap")
            .allowlist_type("rte_mbuf_ext_shared_info")
            .allowlist_type("rte_pktmbuf_extmem")
            .allowlist_type("rte_iova_mode")
            .allowlist_var("RTE_PKTMBUF_HEADROOM")
            .allowlist_var("RING_F_SP_ENQ")
            .allowlist_var("RING_F_SC_DEQ")
            .allowlist_var("RTE_MBUF_DEFAULT_BUF_SIZE")
            .opaque_type("rte_mbuf")
            .opaque_type("rte_mempool")
            .opaque_type("rte_ring")
            .opaque_type("rte_device")
            .layout_tests(false)
            .derive_default(true)
            .generate_comments(false)
            .prepend_enum_name(false);
        for i in &includes {
            b = b.clang_arg(format!("-I{i}"));
        }
        for d in &defines {
            b = b.clang_arg(format!("-D{d}"));
        }
        let bindings = b
            .generate()
            .map_err(|e| io::Error::other(format!("bindgen over shim/cf_dpdk.h failed: {e}")))?;
        bindings.write_to_file(out.join("dpdk.rs"))
    }
}
