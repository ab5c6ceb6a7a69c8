//! # datapath-mlx5: Cornflakes on NVIDIA/Mellanox ConnectX
//!
//! A kernel-bypass datapath over rdma-core's mlx5 direct verbs. Setup (device, protection
//! domain, memory regions, raw-packet QP, CQs, flow rules) goes through libibverbs/mlx5dv; the
//! transmit and receive hot paths are ours: [`Datapath::send_object`](cornflakes_datapath::Transmit::send_object)
//! writes the control segment, the Ethernet segment with the inlined headers and one data
//! segment per gather entry straight into the send queue while walking the object, and the
//! completion queues are polled with the owner-bit protocol.
//!
//! - [`prm`]: the mlx5 layouts and constants (quarantined).
//! - [`mmio`]: the one place that reads/writes device-shared memory and the doorbell.
//! - [`queue`]: the hot path, generic over [`queue::QueueMemory`].
//! - [`emu`]: an emulated ConnectX the tests run the hot path against.
//! - [`datapath`]: [`Mlx5Datapath`], the `cornflakes_datapath::Datapath` over any queue memory.
//! - `hw` (feature `mlx5`): the rdma-core bindings and the hardware queue memory.

#![deny(unsafe_code, unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod datapath;
#[allow(unsafe_code)] // the emulated device's side of the queue memory
pub mod emu;
#[allow(unsafe_code)] // volatile access to device-shared memory
pub mod mmio;
#[rustfmt::skip]
pub mod prm;
#[allow(unsafe_code)] // ring pointer arithmetic, the QueueMemory contract
pub mod queue;

#[cfg(feature = "mlx5")]
#[allow(unsafe_code)] // rdma-core FFI
pub mod hw;

pub use datapath::{DeviceCaps, Mlx5Config, Mlx5Datapath, Mlx5Nic, Mlx5Stats};

use cornflakes_stack::wire::{ethernet, ipv4, udp, MacAddr};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;

/// One steering rule: frames to `dst_mac` with `ethertype` (and, for IPv4/UDP, destination
/// port `udp_dst_port`) go to our receive queue. The hardware path installs these with
/// `ibv_create_flow`; the emulated device applies the same rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRule {
    pub dst_mac: MacAddr,
    pub ethertype: u16,
    pub udp_dst_port: Option<u16>,
}

impl FlowRule {
    /// Whether `frame` matches.
    pub fn matches(&self, frame: &[u8]) -> bool {
        let Ok(eth) = ethernet::Frame::new_checked(frame) else {
            return false;
        };
        if eth.dst_addr() != self.dst_mac {
            return false;
        }
        let et = u16::from_be_bytes([frame[12], frame[13]]);
        if et != self.ethertype {
            return false;
        }
        let Some(port) = self.udp_dst_port else {
            return true;
        };
        let Ok(ip) = ipv4::Packet::new_checked(eth.payload()) else {
            return false;
        };
        if ip.protocol() != ipv4::PROTO_UDP {
            return false;
        }
        udp::Packet::new_checked(ip.payload()).is_ok_and(|u| u.dst_port() == port)
    }
}

/// The rules a datapath at `mac` / UDP `port` installs: our UDP traffic, ARP replies to us,
/// and broadcast ARP requests (so peers can resolve us).
pub fn flow_rules(mac: MacAddr, port: u16) -> Vec<FlowRule> {
    vec![
        FlowRule {
            dst_mac: mac,
            ethertype: ETHERTYPE_IPV4,
            udp_dst_port: Some(port),
        },
        FlowRule {
            dst_mac: mac,
            ethertype: ETHERTYPE_ARP,
            udp_dst_port: None,
        },
        FlowRule {
            dst_mac: MacAddr::BROADCAST,
            ethertype: ETHERTYPE_ARP,
            udp_dst_port: None,
        },
    ]
}

/// The UDP port of server core `core` when the cores of one NIC port listen at consecutive
/// ports from `base_port` (the client picks the core, and so the key shard, by destination
/// port). An error when the port number would pass 65535.
pub fn core_port(base_port: u16, core: usize) -> Result<u16, String> {
    u16::try_from(core)
        .ok()
        .and_then(|c| base_port.checked_add(c))
        .ok_or_else(|| {
            format!("server core {core} at UDP port {base_port} + {core} passes port 65535")
        })
}

/// The rules of server core `core` when each core owns one queue set and listens at
/// [`core_port`]`(base_port, core)`: IPv4/UDP to that port goes to this core's receive queue.
/// Core 0 also takes ARP (to our MAC and broadcast), so the port answers ARP once; the other
/// cores learn their peers' MACs from the requests they receive. Hardware installs these with
/// `ibv_create_flow` on the core's QP; the emulated device applies them per queue set.
pub fn core_flow_rules(mac: MacAddr, base_port: u16, core: usize) -> Result<Vec<FlowRule>, String> {
    let port = core_port(base_port, core)?;
    let mut rules = flow_rules(mac, port);
    if core != 0 {
        rules.retain(|r| r.ethertype == ETHERTYPE_IPV4);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_core_gets_its_own_port_and_only_core_0_takes_arp() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        assert_eq!(core_port(7000, 0), Ok(7000));
        assert_eq!(core_port(7000, 3), Ok(7003));
        assert!(core_port(65535, 1).unwrap_err().contains("65535"));
        assert!(core_port(7000, 1 << 20).is_err());
        let r0 = core_flow_rules(mac, 7000, 0).unwrap();
        assert_eq!(r0, flow_rules(mac, 7000));
        let r1 = core_flow_rules(mac, 7000, 1).unwrap();
        assert_eq!(
            r1,
            vec![FlowRule {
                dst_mac: mac,
                ethertype: ETHERTYPE_IPV4,
                udp_dst_port: Some(7001),
            }]
        );
    }
}
