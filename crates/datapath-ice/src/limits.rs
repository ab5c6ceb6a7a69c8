//! Device capabilities turned into datapath parameters: the scatter-gather limit, the receive
//! buffer size and the checksum split between software and the NIC. Pure logic.

use cornflakes_stack::ChecksumCaps;

/// Scatter-gather entries per packet on the Intel E810 (ice PMD: `ICE_TX_MTU_SEG_MAX`), the
/// limit the paper's evaluation runs with (§6.3).
pub const E810_MAX_SEGMENTS: usize = 8;

/// Used when a port reports no limit (virtual devices report 0): DPDK's `nb_segs` is 16 bits,
/// but no real NIC takes more than a few dozen, and the stack needs a finite number.
pub const UNREPORTED_MAX_SEGMENTS: usize = 64;

/// Bytes DPDK keeps in front of received data (`RTE_PKTMBUF_HEADROOM`).
pub const RX_HEADROOM: usize = 128;

/// The most descriptors one packet may use: the smaller of the port's `nb_seg_max` and
/// `nb_mtu_seg_max` (0 means "not reported"), further lowered by `requested` (a configured or
/// test limit). At least 1.
pub fn tx_segment_limit(nb_seg_max: u16, nb_mtu_seg_max: u16, requested: Option<usize>) -> usize {
    let reported = [nb_seg_max, nb_mtu_seg_max]
        .into_iter()
        .filter(|&n| n > 0)
        .map(usize::from)
        .min()
        .unwrap_or(UNREPORTED_MAX_SEGMENTS);
    requested.map_or(reported, |r| r.min(reported)).max(1)
}

/// Size of each receive buffer for an IP MTU of `mtu`: headroom + Ethernet header (VLAN tag
/// included) + MTU + FCS, rounded up to a power of two (a pinned size class). 2048 for 1500.
pub fn rx_buffer_size(mtu: usize) -> usize {
    (RX_HEADROOM + 18 + mtu + 4).next_power_of_two().max(2048)
}

/// Which checksums the software stack does, given what the port offers and whether offload is
/// wanted: both IPv4 and UDP transmit checksums are offloaded together or not at all (the
/// header template writes the UDP pseudo-header sum for the NIC to complete). Receive checks
/// stay in software: ports that flag bad checksums get those frames dropped before the stack,
/// and frames the port did not check are still verified.
pub fn checksum_caps(offload_wanted: bool, tx_ipv4: bool, tx_udp: bool) -> ChecksumCaps {
    if offload_wanted && tx_ipv4 && tx_udp {
        ChecksumCaps {
            ipv4_tx: false,
            udp_tx: false,
            udp_tx_zero: false,
            ..ChecksumCaps::SOFTWARE
        }
    } else {
        ChecksumCaps::SOFTWARE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e810_reports_eight() {
        // The ice PMD reports nb_seg_max = ICE_MAX_RING_DESC, nb_mtu_seg_max = 8.
        assert_eq!(tx_segment_limit(4096, 8, None), E810_MAX_SEGMENTS);
        assert_eq!(tx_segment_limit(4096, 8, Some(16)), 8);
        assert_eq!(tx_segment_limit(4096, 8, Some(3)), 3);
    }

    #[test]
    fn unreported_limits_use_the_fallback_and_requests() {
        assert_eq!(tx_segment_limit(0, 0, None), UNREPORTED_MAX_SEGMENTS);
        assert_eq!(tx_segment_limit(0, 0, Some(8)), 8);
        assert_eq!(tx_segment_limit(0, 40, None), 40);
        assert_eq!(tx_segment_limit(0, 0, Some(0)), 1);
    }

    #[test]
    fn rx_buffers_fit_a_full_frame_after_the_headroom() {
        assert_eq!(rx_buffer_size(1500), 2048);
        assert!(rx_buffer_size(1500) >= RX_HEADROOM + 14 + 1500 + 4);
        assert_eq!(rx_buffer_size(9000), 16384);
        assert!(rx_buffer_size(9000) >= RX_HEADROOM + 18 + 9000 + 4);
    }

    #[test]
    fn offload_only_when_both_transmit_checksums_are_offered() {
        let sw = ChecksumCaps::SOFTWARE;
        assert_eq!(checksum_caps(true, true, false), sw);
        assert_eq!(checksum_caps(true, false, true), sw);
        assert_eq!(checksum_caps(false, true, true), sw);
        let hw = checksum_caps(true, true, true);
        assert!(!hw.ipv4_tx && !hw.udp_tx && !hw.udp_tx_zero);
        assert!(hw.ipv4_rx && hw.udp_rx, "receive checks stay in software");
    }
}
