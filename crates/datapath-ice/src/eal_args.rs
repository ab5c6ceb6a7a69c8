//! EAL command lines: what the datapath passes to `rte_eal_init`, built from a few options
//! plus the user's own `--dpdk-args`. Pure logic, compiled and tested without DPDK.
//!
//! The defaults are chosen so a run leaves nothing behind: `--in-memory` (no shared runtime
//! files or hugepage files in `/dev/hugepages`), a unique `--file-prefix`, and `--no-huge` when
//! no 2 MiB hugepages are free (then `--no-shconf` instead of `--in-memory`, which the EAL
//! refuses without hugepages). `--iova-mode=va` is the default because pinned regions are
//! registered with their virtual addresses as IOVAs (that needs the IOMMU with vfio-pci on a
//! real NIC; see the README).

use std::fmt;
use std::path::Path;

/// Whether the EAL uses hugepages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HugePolicy {
    /// Hugepages when some are free, `--no-huge` otherwise.
    #[default]
    Auto,
    /// Always `--no-huge` (tests, virtual devices).
    Never,
    /// Never add `--no-huge` (a real NIC; the EAL fails if none are reserved).
    Require,
}

/// The options the EAL command line is built from.
#[derive(Clone, Debug)]
pub struct EalOptions {
    /// `-l`: the lcores (the datapath runs on the thread that initialises the EAL).
    pub lcores: String,
    /// `-m`: megabytes of DPDK memory (mbuf structs, descriptor rings). `None` = EAL default,
    /// except with `--no-huge`, where 256 is used.
    pub memory_mb: Option<u32>,
    /// Hugepage policy.
    pub huge: HugePolicy,
    /// PCI devices to use (`-a`). Empty = `--no-pci` (virtual devices only).
    pub pci_allow: Vec<String>,
    /// Virtual devices (`--vdev`), e.g. `net_af_packet0,iface=veth0`.
    pub vdevs: Vec<String>,
    /// `--file-prefix`; `None` = `cf-ice-<pid>`.
    pub file_prefix: Option<String>,
    /// `--in-memory` (with hugepages) or `--no-shconf` (without): no runtime files at all
    /// (default true).
    pub in_memory: bool,
    /// `--iova-mode=va` (default true).
    pub iova_va: bool,
    /// `--log-level`, e.g. `notice` or `pmd.net.ice:debug`.
    pub log_level: Option<String>,
    /// Appended verbatim (the user's `--dpdk-args`); an option given here replaces the one
    /// the fields above would add.
    pub extra: Vec<String>,
}

impl Default for EalOptions {
    fn default() -> Self {
        EalOptions {
            lcores: "0".into(),
            memory_mb: None,
            huge: HugePolicy::Auto,
            pci_allow: Vec::new(),
            vdevs: Vec::new(),
            file_prefix: None,
            in_memory: true,
            iova_va: true,
            log_level: Some("notice".into()),
            extra: Vec::new(),
        }
    }
}

/// Whether the user's `extra` arguments already set `opt` (or something that replaces it).
fn overridden(extra: &[String], opt: &str) -> bool {
    extra.iter().any(|a| {
        a == opt
            || a.strip_prefix(opt)
                .is_some_and(|rest| rest.starts_with('='))
            || (opt == "-l" && (a == "--lcores" || a.starts_with("--lcores=") || a == "-c"))
            || (opt == "--no-pci" && (a == "-a" || a.starts_with("--allow") || a == "-b"))
            || (opt == "--no-huge" && a == "--no-huge")
    })
}

impl EalOptions {
    /// The argument vector for `rte_eal_init` (program name first). `free_hugepages` is the
    /// number of free 2 MiB hugepages ([`free_hugepages`]); `pid` names the file prefix.
    pub fn to_args(&self, free_hugepages: u64, pid: u32) -> Vec<String> {
        let mut a = vec!["cornflakes-ice".to_string()];
        let ex = &self.extra;
        if !overridden(ex, "-l") {
            a.push("-l".into());
            a.push(self.lcores.clone());
        }
        let no_huge = match self.huge {
            HugePolicy::Never => true,
            HugePolicy::Require => false,
            HugePolicy::Auto => free_hugepages == 0,
        };
        if no_huge && !overridden(ex, "--no-huge") {
            a.push("--no-huge".into());
        }
        let mem = self.memory_mb.or(if no_huge { Some(256) } else { None });
        if let Some(m) = mem {
            if !overridden(ex, "-m") {
                a.push("-m".into());
                a.push(m.to_string());
            }
        }
        if self.pci_allow.is_empty() {
            if !overridden(ex, "--no-pci") {
                a.push("--no-pci".into());
            }
        } else {
            for p in &self.pci_allow {
                a.push("-a".into());
                a.push(p.clone());
            }
        }
        for v in &self.vdevs {
            a.push("--vdev".into());
            a.push(v.clone());
        }
        if !overridden(ex, "--file-prefix") {
            let prefix = self
                .file_prefix
                .clone()
                .unwrap_or_else(|| format!("cf-ice-{pid}"));
            a.push(format!("--file-prefix={prefix}"));
        }
        // `--in-memory` needs hugepages (`--no-huge` implies legacy memory, which it refuses);
        // without them `--no-shconf` keeps the EAL from writing its shared configuration.
        if self.in_memory && !overridden(ex, "--in-memory") && !overridden(ex, "--no-shconf") {
            a.push(
                if no_huge {
                    "--no-shconf"
                } else {
                    "--in-memory"
                }
                .into(),
            );
        }
        if self.in_memory && !overridden(ex, "--telemetry") && !overridden(ex, "--no-telemetry") {
            // The telemetry socket would live in the runtime directory.
            a.push("--no-telemetry".into());
        }
        if self.iova_va && !overridden(ex, "--iova-mode") {
            a.push("--iova-mode=va".into());
        }
        if let Some(l) = &self.log_level {
            if !overridden(ex, "--log-level") {
                a.push(format!("--log-level={l}"));
            }
        }
        a.extend(ex.iter().cloned());
        a
    }
}

/// The device a datapath should drive, from EAL arguments: the first `-a`/`--allow` PCI
/// address (without its `,key=value` device arguments), else the first `--vdev` name. `None`
/// when the arguments name no device.
pub fn first_device(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    let mut vdev = None;
    while let Some(a) = it.next() {
        let value = |flag: &str, a: &String, it: &mut std::slice::Iter<'_, String>| {
            if a == flag {
                it.next().cloned()
            } else {
                a.strip_prefix(flag)
                    .and_then(|r| r.strip_prefix('='))
                    .map(str::to_string)
            }
        };
        let name = |v: String| v.split(',').next().unwrap_or_default().to_string();
        if let Some(v) = value("-a", a, &mut it).or_else(|| value("--allow", a, &mut it)) {
            return Some(name(v));
        }
        if let Some(v) = value("--vdev", a, &mut it) {
            vdev.get_or_insert(name(v));
        }
    }
    vdev
}

/// Free 2 MiB hugepages on this machine (0 when unknown).
pub fn free_hugepages() -> u64 {
    free_hugepages_at(Path::new(
        "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
    ))
}

fn free_hugepages_at(p: &Path) -> u64 {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A `--dpdk-args` string that could not be split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnterminatedQuote;

impl fmt::Display for UnterminatedQuote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unterminated quote in DPDK arguments")
    }
}

impl std::error::Error for UnterminatedQuote {}

/// Splits a command-line string the way a shell would for plain words: whitespace separates,
/// single and double quotes group, a backslash escapes the next character (outside single
/// quotes). `"-a 0000:3b:00.0 --vdev 'net_af_packet0,iface=eth1'"` gives four words.
pub fn split_args(s: &str) -> Result<Vec<String>, UnterminatedQuote> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(UnterminatedQuote),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => cur.push(chars.next().ok_or(UnterminatedQuote)?),
                        Some(x) => cur.push(x),
                        None => return Err(UnterminatedQuote),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next().ok_or(UnterminatedQuote)?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(a: &[String], w: &str) -> bool {
        a.iter().any(|x| x == w)
    }

    #[test]
    fn defaults_without_hugepages_are_no_huge_in_memory_unique_prefix() {
        let a = EalOptions::default().to_args(0, 4242);
        assert_eq!(a[0], "cornflakes-ice");
        assert!(has(&a, "--no-huge"));
        assert!(has(&a, "--no-pci"));
        assert!(has(&a, "--no-shconf"));
        assert!(
            !has(&a, "--in-memory"),
            "the EAL refuses --in-memory with --no-huge"
        );
        assert!(has(&a, "--iova-mode=va"));
        assert!(has(&a, "--no-telemetry"));
        assert!(has(&a, "--file-prefix=cf-ice-4242"));
        let m = a.iter().position(|x| x == "-m").expect("-m with --no-huge");
        assert_eq!(a[m + 1], "256");
    }

    #[test]
    fn hugepages_used_when_free_and_pci_allow_replaces_no_pci() {
        let o = EalOptions {
            pci_allow: vec!["0000:3b:00.0".into()],
            ..EalOptions::default()
        };
        let a = o.to_args(512, 1);
        assert!(!has(&a, "--no-huge"));
        assert!(!has(&a, "-m"));
        assert!(has(&a, "--in-memory"));
        assert!(!has(&a, "--no-pci"));
        let i = a.iter().position(|x| x == "-a").expect("-a");
        assert_eq!(a[i + 1], "0000:3b:00.0");
    }

    #[test]
    fn policies_override_detection() {
        let never = EalOptions {
            huge: HugePolicy::Never,
            ..EalOptions::default()
        };
        assert!(has(&never.to_args(512, 1), "--no-huge"));
        let req = EalOptions {
            huge: HugePolicy::Require,
            ..EalOptions::default()
        };
        assert!(!has(&req.to_args(0, 1), "--no-huge"));
    }

    #[test]
    fn user_arguments_replace_ours() {
        let o = EalOptions {
            vdevs: vec!["net_ring0".into()],
            extra: split_args("-l 2-3 --file-prefix=mine --iova-mode=pa -a 0000:01:00.0").unwrap(),
            ..EalOptions::default()
        };
        let a = o.to_args(0, 7);
        assert_eq!(a.iter().filter(|x| *x == "-l").count(), 1);
        assert!(has(&a, "2-3"));
        assert!(!has(&a, "0"));
        assert!(has(&a, "--file-prefix=mine"));
        assert!(!has(&a, "--file-prefix=cf-ice-7"));
        assert!(!has(&a, "--iova-mode=va"));
        assert!(
            !has(&a, "--no-pci"),
            "-a from the user must not be combined with --no-pci"
        );
        let v = a.iter().position(|x| x == "--vdev").unwrap();
        assert_eq!(a[v + 1], "net_ring0");
    }

    #[test]
    fn split_handles_quotes_and_escapes() {
        assert_eq!(
            split_args(r#" -a 0000:3b:00.0  --vdev 'net_af_packet0,iface=eth 1' "x\"y" a\ b "#)
                .unwrap(),
            vec![
                "-a",
                "0000:3b:00.0",
                "--vdev",
                "net_af_packet0,iface=eth 1",
                "x\"y",
                "a b"
            ]
        );
        assert_eq!(split_args("").unwrap(), Vec::<String>::new());
        assert_eq!(split_args("''").unwrap(), vec![""]);
        assert_eq!(split_args("'open"), Err(UnterminatedQuote));
        assert_eq!(split_args("\"open"), Err(UnterminatedQuote));
        assert_eq!(split_args("trailing\\"), Err(UnterminatedQuote));
    }

    #[test]
    fn first_device_prefers_pci_then_vdev() {
        let w = |s: &str| split_args(s).unwrap();
        assert_eq!(
            first_device(&w("-l 1 --vdev net_ring0 -a 0000:3b:00.0,rx_low_latency=1")),
            Some("0000:3b:00.0".into())
        );
        assert_eq!(
            first_device(&w("--allow=0000:5e:00.1 -a 0000:3b:00.0")),
            Some("0000:5e:00.1".into())
        );
        assert_eq!(
            first_device(&w("--vdev=net_af_packet0,iface=eth1 --vdev net_ring0")),
            Some("net_af_packet0".into())
        );
        assert_eq!(first_device(&w("-l 0-3 --no-huge")), None);
        assert_eq!(first_device(&w("-a")), None, "a flag without its value");
    }

    #[test]
    fn hugepage_count_reads_sysfs_format() {
        let dir = std::env::temp_dir().join(format!("cf-ice-hp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("free_hugepages");
        std::fs::write(&f, "17\n").unwrap();
        assert_eq!(free_hugepages_at(&f), 17);
        std::fs::write(&f, "garbage").unwrap();
        assert_eq!(free_hugepages_at(&f), 0);
        assert_eq!(free_hugepages_at(&dir.join("missing")), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
