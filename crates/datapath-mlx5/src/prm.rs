//! mlx5 hardware layouts and constants (the ConnectX "PRM" as far as this driver uses it).
//!
//! Quarantined here, names kept verbatim from `<infiniband/mlx5dv.h>` (rdma-core 44) so they
//! can be grepped against it; with the `mlx5` feature, `tests` below check every size and
//! offset against the bindgen output of that header. Multi-byte fields are big-endian on the
//! device: the structs store them as the device sees them (`__be32` etc.) and the accessors
//! convert. Nothing here touches device memory; [`crate::queue`] copies the encoded 16-byte
//! units into the rings.
#![allow(non_upper_case_globals, missing_docs)]

/// Bytes per send WQE basic block (WQEBB).
pub const MLX5_SEND_WQE_BB: usize = 64;
/// Bytes per WQE "data size" unit (the `ds` count in the control segment).
pub const MLX5_SEND_WQE_DS: usize = 16;
/// Units per WQEBB.
pub const UNITS_PER_BB: usize = MLX5_SEND_WQE_BB / MLX5_SEND_WQE_DS;
/// Largest `ds` a control segment can hold (6 bits).
pub const MLX5_MAX_DS: usize = 0x3f;

pub const MLX5_OPCODE_SEND: u8 = 0x0a;
pub const MLX5_WQE_CTRL_CQ_UPDATE: u8 = 2 << 2;
pub const MLX5_ETH_WQE_L3_CSUM: u8 = 1 << 6;
pub const MLX5_ETH_WQE_L4_CSUM: u8 = 1 << 7;
/// Ethernet header + one VLAN tag: what the Ethernet segment inlines without spilling (rdma-core
/// provider `mlx5.h`, not exported by mlx5dv.h; equals [`ETH_SEG_INLINE`]).
pub const MLX5_ETH_L2_INLINE_HEADER_SIZE: usize = 18;
pub const MLX5_INVALID_LKEY: u32 = 0x100;
pub const MLX5_INLINE_SEG: u32 = 0x8000_0000;

pub const MLX5_RCV_DBR: usize = 0;
pub const MLX5_SND_DBR: usize = 1;

pub const MLX5_CQE_OWNER_MASK: u8 = 1;
pub const MLX5_CQE_REQ: u8 = 0;
pub const MLX5_CQE_RESP_SEND: u8 = 2;
pub const MLX5_CQE_REQ_ERR: u8 = 13;
pub const MLX5_CQE_RESP_ERR: u8 = 14;
pub const MLX5_CQE_INVALID: u8 = 15;

pub const MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: u8 = 0x01;
pub const MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: u8 = 0x02;
pub const MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: u8 = 0x04;
pub const MLX5_CQE_SYNDROME_WR_FLUSH_ERR: u8 = 0x05;

pub const MLX5_CQE_L2_OK: u8 = 1 << 0;
pub const MLX5_CQE_L3_OK: u8 = 1 << 1;
pub const MLX5_CQE_L4_OK: u8 = 1 << 2;
pub const MLX5_CQE_L3_HDR_TYPE_IPV4: u8 = 0x2;
/// `l4_hdr_type_etc >> 4 & 7` for UDP (PRM; the kernel's `CQE_L4_HDR_TYPE_UDP`, absent from
/// mlx5dv.h).
pub const CQE_L4_HDR_TYPE_UDP: u8 = 0x2;

/// `struct mlx5_wqe_ctrl_seg` (16 bytes, packed, big-endian fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtrlSeg {
    pub opmod_idx_opcode: u32,
    pub qpn_ds: u32,
    pub signature: u8,
    pub dci_stream_channel_id: [u8; 2],
    pub fm_ce_se: u8,
    pub imm: u32,
}

impl CtrlSeg {
    /// A control segment for WQE index `pi` of QP `qpn` with `ds` 16-byte units.
    pub fn new(pi: u16, opcode: u8, qpn: u32, ds: u8, fm_ce_se: u8) -> CtrlSeg {
        CtrlSeg {
            opmod_idx_opcode: ((u32::from(pi) << 8) | u32::from(opcode)).to_be(),
            qpn_ds: ((qpn << 8) | u32::from(ds)).to_be(),
            signature: 0,
            dci_stream_channel_id: [0; 2],
            fm_ce_se,
            imm: 0,
        }
    }

    pub fn opcode(&self) -> u8 {
        u32::from_be(self.opmod_idx_opcode) as u8
    }

    pub fn wqe_index(&self) -> u16 {
        (u32::from_be(self.opmod_idx_opcode) >> 8) as u16
    }

    pub fn qpn(&self) -> u32 {
        u32::from_be(self.qpn_ds) >> 8
    }

    pub fn ds(&self) -> u8 {
        (u32::from_be(self.qpn_ds) & 0x3f) as u8
    }

    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.opmod_idx_opcode.to_ne_bytes());
        b[4..8].copy_from_slice(&self.qpn_ds.to_ne_bytes());
        b[8] = self.signature;
        b[9..11].copy_from_slice(&self.dci_stream_channel_id);
        b[11] = self.fm_ce_se;
        b[12..16].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; 16]) -> CtrlSeg {
        CtrlSeg {
            opmod_idx_opcode: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            qpn_ds: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            signature: b[8],
            dci_stream_channel_id: [b[9], b[10]],
            fm_ce_se: b[11],
            imm: u32::from_ne_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// The first 8 bytes, as written to the doorbell (BlueFlame) register.
    pub fn doorbell_word(&self) -> u64 {
        let b = self.to_bytes();
        u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

/// Byte offset of `fm_ce_se` inside the control segment.
pub const CTRL_FM_CE_SE_OFFSET: usize = 11;

/// `struct mlx5_wqe_eth_seg` (32 bytes): checksum flags and the first inlined header bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthSeg {
    pub rsvd0: u32,
    pub cs_flags: u8,
    pub rsvd1: u8,
    pub mss: u16,
    pub rsvd2: u32,
    pub inline_hdr_sz: u16,
    pub inline_hdr_start: [u8; 2],
    pub inline_hdr: [u8; 16],
}

/// Inline bytes the Ethernet segment itself holds (`inline_hdr_start` + `inline_hdr`).
pub const ETH_SEG_INLINE: usize = 18;

impl EthSeg {
    /// The segment's two 16-byte units, written straight (what `to_bytes` of an `EthSeg` with
    /// these fields gives, without building one): checksum flags `cs_flags`, `n_inline` inline
    /// header bytes of which the first [`ETH_SEG_INLINE`] are `head`.
    #[inline(always)]
    pub fn units(cs_flags: u8, n_inline: u16, head: &[u8; ETH_SEG_INLINE]) -> [[u8; 16]; 2] {
        let mut a = [0u8; 16];
        a[4] = cs_flags;
        a[12..14].copy_from_slice(&n_inline.to_be_bytes());
        a[14..16].copy_from_slice(&head[..2]);
        let mut b = [0u8; 16];
        b.copy_from_slice(&head[2..]);
        [a, b]
    }

    pub fn inline_len(&self) -> usize {
        usize::from(u16::from_be(self.inline_hdr_sz))
    }

    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(&self.rsvd0.to_ne_bytes());
        b[4] = self.cs_flags;
        b[5] = self.rsvd1;
        b[6..8].copy_from_slice(&self.mss.to_ne_bytes());
        b[8..12].copy_from_slice(&self.rsvd2.to_ne_bytes());
        b[12..14].copy_from_slice(&self.inline_hdr_sz.to_ne_bytes());
        b[14..16].copy_from_slice(&self.inline_hdr_start);
        b[16..32].copy_from_slice(&self.inline_hdr);
        b
    }

    pub fn from_bytes(b: &[u8; 32]) -> EthSeg {
        let mut inline_hdr = [0u8; 16];
        inline_hdr.copy_from_slice(&b[16..32]);
        EthSeg {
            rsvd0: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            cs_flags: b[4],
            rsvd1: b[5],
            mss: u16::from_ne_bytes([b[6], b[7]]),
            rsvd2: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            inline_hdr_sz: u16::from_ne_bytes([b[12], b[13]]),
            inline_hdr_start: [b[14], b[15]],
            inline_hdr,
        }
    }
}

/// `struct mlx5_wqe_data_seg` (16 bytes): one gather (send) or scatter (receive) entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataSeg {
    pub byte_count: u32,
    pub lkey: u32,
    pub addr: u64,
}

impl DataSeg {
    pub fn new(addr: u64, len: u32, lkey: u32) -> DataSeg {
        DataSeg {
            byte_count: len.to_be(),
            lkey: lkey.to_be(),
            addr: addr.to_be(),
        }
    }

    pub fn len(&self) -> u32 {
        u32::from_be(self.byte_count)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn key(&self) -> u32 {
        u32::from_be(self.lkey)
    }

    pub fn address(&self) -> u64 {
        u64::from_be(self.addr)
    }

    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.byte_count.to_ne_bytes());
        b[4..8].copy_from_slice(&self.lkey.to_ne_bytes());
        b[8..16].copy_from_slice(&self.addr.to_ne_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; 16]) -> DataSeg {
        DataSeg {
            byte_count: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            lkey: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            addr: u64::from_ne_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }
}

/// `struct mlx5_cqe64` (the fields this driver reads or the emulator writes). In an error CQE
/// (`struct mlx5_err_cqe`) bytes 54 and 55 are `vendor_err_synd` and `syndrome`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe64 {
    pub rsvd0: [u8; 2],
    pub wqe_id: u16,
    pub rsvd4: [u8; 13],
    pub ml_path: u8,
    pub rsvd20: [u8; 4],
    pub slid: u16,
    pub flags_rqpn: u32,
    pub hds_ip_ext: u8,
    pub l4_hdr_type_etc: u8,
    pub vlan_info: u16,
    pub srqn_uidx: u32,
    pub imm_inval_pkey: u32,
    pub app: u8,
    pub app_op: u8,
    pub app_info: u16,
    pub byte_cnt: u32,
    pub timestamp: u64,
    pub sop_drop_qpn: u32,
    pub wqe_counter: u16,
    pub signature: u8,
    pub op_own: u8,
}

/// Offsets of the `mlx5_cqe64` / `mlx5_err_cqe` fields used here.
pub mod cqe_off {
    pub const HDS_IP_EXT: usize = 28;
    pub const L4_HDR_TYPE_ETC: usize = 29;
    pub const BYTE_CNT: usize = 44;
    pub const VENDOR_ERR_SYND: usize = 54;
    pub const SYNDROME: usize = 55;
    pub const SOP_DROP_QPN: usize = 56;
    pub const WQE_COUNTER: usize = 60;
    pub const OP_OWN: usize = 63;
}

/// A decoded completion: what the poller needs from a `mlx5_cqe64`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub opcode: u8,
    pub owner: u8,
    pub wqe_counter: u16,
    pub byte_cnt: u32,
    pub hds_ip_ext: u8,
    pub l4_hdr_type_etc: u8,
    pub syndrome: u8,
    pub vendor_err_synd: u8,
    pub qpn: u32,
}

impl Cqe {
    #[inline]
    pub fn decode(b: &[u8; 64]) -> Cqe {
        use cqe_off::*;
        let be32 = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        Cqe {
            opcode: b[OP_OWN] >> 4,
            owner: b[OP_OWN] & MLX5_CQE_OWNER_MASK,
            wqe_counter: u16::from_be_bytes([b[WQE_COUNTER], b[WQE_COUNTER + 1]]),
            byte_cnt: be32(BYTE_CNT),
            hds_ip_ext: b[HDS_IP_EXT],
            l4_hdr_type_etc: b[L4_HDR_TYPE_ETC],
            syndrome: b[SYNDROME],
            vendor_err_synd: b[VENDOR_ERR_SYND],
            qpn: be32(SOP_DROP_QPN) & 0x00ff_ffff,
        }
    }

    pub fn encode(&self) -> [u8; 64] {
        use cqe_off::*;
        let mut b = [0u8; 64];
        b[HDS_IP_EXT] = self.hds_ip_ext;
        b[L4_HDR_TYPE_ETC] = self.l4_hdr_type_etc;
        b[BYTE_CNT..BYTE_CNT + 4].copy_from_slice(&self.byte_cnt.to_be_bytes());
        b[VENDOR_ERR_SYND] = self.vendor_err_synd;
        b[SYNDROME] = self.syndrome;
        b[SOP_DROP_QPN..SOP_DROP_QPN + 4].copy_from_slice(&self.qpn.to_be_bytes());
        b[WQE_COUNTER..WQE_COUNTER + 2].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[OP_OWN] = (self.opcode << 4) | (self.owner & MLX5_CQE_OWNER_MASK);
        b
    }

    /// L3 header type (`l4_hdr_type_etc >> 2 & 3`).
    pub fn l3_hdr_type(&self) -> u8 {
        (self.l4_hdr_type_etc >> 2) & 0x3
    }

    /// L4 header type (`l4_hdr_type_etc >> 4 & 7`).
    pub fn l4_hdr_type(&self) -> u8 {
        (self.l4_hdr_type_etc >> 4) & 0x7
    }
}

/// `op_own` of a CQE slot the device has never written: opcode INVALID, owner 1, as rdma-core
/// initialises CQ buffers.
pub const CQE_INIT_OP_OWN: u8 = (MLX5_CQE_INVALID << 4) | 1;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn eth_units_are_the_segment_bytes() {
        let head: [u8; ETH_SEG_INLINE] = std::array::from_fn(|i| 0xa0 + i as u8);
        let seg = EthSeg {
            cs_flags: MLX5_ETH_WQE_L3_CSUM | MLX5_ETH_WQE_L4_CSUM,
            inline_hdr_sz: 130u16.to_be(),
            inline_hdr_start: [head[0], head[1]],
            inline_hdr: std::array::from_fn(|i| head[i + 2]),
            ..EthSeg::default()
        };
        let [a, b] = EthSeg::units(seg.cs_flags, 130, &head);
        let bytes = seg.to_bytes();
        assert_eq!((&a[..], &b[..]), (&bytes[..16], &bytes[16..]));
        assert_eq!(EthSeg::from_bytes(&bytes).inline_len(), 130);
    }

    #[test]
    fn sizes_and_offsets() {
        assert_eq!(size_of::<CtrlSeg>(), 16);
        assert_eq!(offset_of!(CtrlSeg, fm_ce_se), CTRL_FM_CE_SE_OFFSET);
        assert_eq!(size_of::<EthSeg>(), 32);
        assert_eq!(offset_of!(EthSeg, inline_hdr_start), 14);
        assert_eq!(size_of::<DataSeg>(), 16);
        assert_eq!(MLX5_ETH_L2_INLINE_HEADER_SIZE, ETH_SEG_INLINE);
        assert_eq!(size_of::<Cqe64>(), 64);
        assert_eq!(offset_of!(Cqe64, hds_ip_ext), cqe_off::HDS_IP_EXT);
        assert_eq!(offset_of!(Cqe64, l4_hdr_type_etc), cqe_off::L4_HDR_TYPE_ETC);
        assert_eq!(offset_of!(Cqe64, byte_cnt), cqe_off::BYTE_CNT);
        assert_eq!(offset_of!(Cqe64, sop_drop_qpn), cqe_off::SOP_DROP_QPN);
        assert_eq!(offset_of!(Cqe64, wqe_counter), cqe_off::WQE_COUNTER);
        assert_eq!(offset_of!(Cqe64, op_own), cqe_off::OP_OWN);
    }

    #[test]
    fn ctrl_seg_matches_mlx5dv_set_ctrl_seg() {
        // mlx5dv_set_ctrl_seg(seg, pi=0x1234, SEND, opmod 0, qpn=0xabcde, CQ_UPDATE, ds=5).
        let c = CtrlSeg::new(
            0x1234,
            MLX5_OPCODE_SEND,
            0xabcde,
            5,
            MLX5_WQE_CTRL_CQ_UPDATE,
        );
        let b = c.to_bytes();
        assert_eq!(&b[0..4], &[0x00, 0x12, 0x34, 0x0a]);
        assert_eq!(&b[4..8], &[0x0a, 0xbc, 0xde, 0x05]);
        assert_eq!(b[11], 8);
        assert_eq!(CtrlSeg::from_bytes(&b), c);
        assert_eq!(
            (c.wqe_index(), c.opcode(), c.qpn(), c.ds()),
            (0x1234, 0x0a, 0xabcde, 5)
        );
    }

    #[test]
    fn data_seg_and_cqe_round_trip() {
        let d = DataSeg::new(0x1122_3344_5566_7788, 1500, 0x42);
        let b = d.to_bytes();
        assert_eq!(&b[0..4], &1500u32.to_be_bytes());
        assert_eq!(&b[8..16], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(DataSeg::from_bytes(&b), d);
        let c = Cqe {
            opcode: MLX5_CQE_REQ_ERR,
            owner: 1,
            wqe_counter: 0xfffe,
            byte_cnt: 77,
            hds_ip_ext: MLX5_CQE_L3_OK,
            l4_hdr_type_etc: 0x28,
            syndrome: MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
            vendor_err_synd: 0x33,
            qpn: 0x123,
        };
        let e = c.encode();
        assert_eq!(e[63], 0xd1);
        assert_eq!(Cqe::decode(&e), c);
        assert_eq!(c.l3_hdr_type(), MLX5_CQE_L3_HDR_TYPE_IPV4);
        assert_eq!(c.l4_hdr_type(), CQE_L4_HDR_TYPE_UDP);
    }
}
