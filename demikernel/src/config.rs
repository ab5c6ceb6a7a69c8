//! The catpowder LibOS's configuration file (YAML, read from `CONFIG_PATH` by `LibOS::new`).
//!
//! Demikernel 1.5.13 reads every key with `unwrap`: a missing or malformed key panics inside
//! `Config::new` (`ScanError … did not find expected key`) rather than returning an error, so
//! the file is always written whole by [`CatpowderConfig::yaml`].

use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// What catpowder needs to own one address on one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatpowderConfig {
    /// The address Demikernel owns (the interface should have no kernel address, or the
    /// kernel answers the same packets with resets).
    pub ip: Ipv4Addr,
    /// The interface's MAC address.
    pub mac: [u8; 6],
    /// The interface (catpowder finds it through `/sys/class/net/<name>/ifindex`, so the
    /// process must see its namespace's `/sys`: run it with `ip netns exec`).
    pub ifname: String,
    /// Static ARP entries (Demikernel's ARP table), besides our own address.
    pub arp: Vec<(Ipv4Addr, [u8; 6])>,
    /// IP MTU; the MSS is `mtu - 40`.
    pub mtu: usize,
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl CatpowderConfig {
    /// `ip` on `ifname`, its MAC read from `/sys/class/net/<ifname>/address`, MTU 1500.
    pub fn for_interface(ifname: &str, ip: Ipv4Addr) -> io::Result<CatpowderConfig> {
        let path = format!("/sys/class/net/{ifname}/address");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("reading {path}: {e}")))?;
        let mac = netns_harness::parse_mac(text.trim())?;
        Ok(CatpowderConfig {
            ip,
            mac,
            ifname: ifname.to_owned(),
            arp: Vec::new(),
            mtu: 1500,
        })
    }

    /// The YAML file: every key Demikernel 1.5.13 reads (keepalive off, linger 0, `nodelay`,
    /// no checksum offload, MSS `mtu - 40`).
    pub fn yaml(&self) -> String {
        let own = mac(self.mac);
        let mut lines = vec![
            "demikernel:".to_string(),
            format!("  local_ipv4_addr: {}", self.ip),
            format!("  local_link_addr: \"{own}\""),
            "raw_socket:".to_string(),
            format!("  linux_interface_name: \"{}\"", self.ifname),
            "  xdp_interface_index: 0".to_string(),
            "tcp_socket_options:".to_string(),
            "  keepalive:".to_string(),
            "    enabled: false".to_string(),
            "    time_millis: 0".to_string(),
            "    interval: 0".to_string(),
            "  linger:".to_string(),
            "    enabled: true".to_string(),
            "    time_seconds: 0".to_string(),
            "  nodelay: true".to_string(),
            "inetstack_config:".to_string(),
            format!("  mtu: {}", self.mtu),
            format!("  mss: {}", self.mtu.saturating_sub(40)),
            "  enable_jumbo_frames: false".to_string(),
            "  udp_checksum_offload: false".to_string(),
            "  tcp_checksum_offload: false".to_string(),
            "  arp_table:".to_string(),
            format!("    \"{own}\": \"{}\"", self.ip),
        ];
        for (ip, m) in &self.arp {
            lines.push(format!("    \"{}\": \"{ip}\"", mac(*m)));
        }
        lines.extend([
            "  arp_request_retries: 3".to_string(),
            "  arp_request_timeout: 1".to_string(),
            "  arp_cache_ttl: 600".to_string(),
        ]);
        lines.join("\n") + "\n"
    }

    /// Writes [`yaml`](Self::yaml) to `dir/cfdemi-<pid>.yaml`; returns the path.
    pub fn write_in(&self, dir: &Path) -> io::Result<PathBuf> {
        let path = dir.join(format!("cfdemi-{}.yaml", std::process::id()));
        std::fs::write(&path, self.yaml())
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_yaml_names_the_address_the_interface_and_every_arp_entry() {
        let c = CatpowderConfig {
            ip: Ipv4Addr::new(10, 1, 2, 1),
            mac: [2, 0, 0, 0, 0, 0xa],
            ifname: "veth0".into(),
            arp: vec![(Ipv4Addr::new(10, 1, 2, 2), [2, 0, 0, 0, 0, 0xb])],
            mtu: 1500,
        };
        let y = c.yaml();
        assert!(y.contains("local_ipv4_addr: 10.1.2.1\n"), "{y}");
        assert!(y.contains("linux_interface_name: \"veth0\""), "{y}");
        assert!(y.contains("\"02:00:00:00:00:0a\": \"10.1.2.1\""), "{y}");
        assert!(y.contains("\"02:00:00:00:00:0b\": \"10.1.2.2\""), "{y}");
        assert!(y.contains("mss: 1460\n"), "{y}");
    }
}
