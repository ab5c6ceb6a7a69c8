//! Capturing a client's requests as the emulated wire carries them: each app's request code
//! sends on a real client datapath (the ConnectX driver on a single-threaded emulated device),
//! and what reaches the wire becomes the [`Request`]s the device's clients replay. So a
//! benchmark's requests are exactly what its client would send, without each app building its
//! own client NIC.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, Transmit};
use cornflakes::mem::MemoryConfig;
use cornflakes::{ConnId, PinnedMemory};
use cornflakes_stack::iface::{StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::wire::{ethernet, framing, ipv4, MacAddr};
use datapath_mlx5::emu::{EmuConfig, EmuNic, EmuQueues};
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};

use crate::Request;

const C_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x01]);
const S_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0xee, 0x02]);

/// The client datapath requests are captured from.
pub type CaptureDatapath = Mlx5Datapath<EmuQueues>;

/// Captures `n` requests: `send(dp, conn, i)` sends request `i` on a client datapath of IP MTU
/// `mtu` (connection `conn` to the server); each must leave as one frame. `what` names the
/// requests in errors (e.g. `cornflakes requests`).
pub fn capture<E: std::fmt::Display>(
    what: &str,
    n: usize,
    mtu: usize,
    mut send: impl FnMut(&mut CaptureDatapath, ConnId, u64) -> Result<(), E>,
) -> Result<Vec<Request>, String> {
    let err = |step: &str, e: &dyn std::fmt::Display| format!("preparing {what}: {step}: {e}");
    let nic = EmuNic::new(EmuConfig {
        mtu,
        ..EmuConfig::default()
    })
    .map_err(|e| err("device", &e))?;
    let mem = PinnedMemory::new(MemoryConfig {
        max_item_size: 64 * 1024,
        ..MemoryConfig::default()
    })
    .map_err(|e| err("memory", &e))?;
    nic.register(&mem).map_err(|e| err("register", &e))?;
    let me = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 5000);
    let server = SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 2), 7000);
    nic.set_flows(&flow_rules(C_MAC, me.port()));
    let mut stack = StackConfig::new(C_MAC, me);
    stack.mtu = mtu;
    stack.static_arp = vec![(*server.ip(), S_MAC)];
    let caps = DeviceCaps {
        max_send_sge: 30,
        inline_len: 18,
        mtu,
        csum_offload: true,
    };
    let mut cfg = Mlx5Config::new(stack);
    cfg.rx_buf_size = mtu + ethernet::HEADER_LEN;
    let mut dp =
        Mlx5Datapath::new(nic.queues(), mem, caps, cfg).map_err(|e| err("datapath", &e))?;
    let conn = dp.connect(server).map_err(|e| err("connect", &e))?;
    let mut out = Vec::with_capacity(n);
    for id in 0..n as u64 {
        nic.clear_wire();
        send(&mut dp, conn, id).map_err(|e| err("send", &e))?;
        dp.flush().map_err(|e| err("flush", &e))?;
        nic.process();
        dp.poll_completions();
        let wire = nic.wire();
        let [frame] = wire.as_slice() else {
            return Err(format!(
                "{what}: a request takes {} frames at IP MTU {mtu}; the emulated wire carries \
                 single-frame messages (raise --mtu)",
                wire.len()
            ));
        };
        let ip = ipv4::Packet::new_checked(&frame[ethernet::HEADER_LEN..])
            .map_err(|e| err("captured frame", &format!("{e:?}")))?;
        let end = ethernet::HEADER_LEN + ip.total_len() as usize;
        let f = framing::Packet::new_checked(&frame[FRAME_OVERHEAD - framing::HEADER_LEN..end])
            .map_err(|e| err("captured frame", &format!("{e:?}")))?;
        out.push(Request::new(
            f.msg_type(),
            frame[FRAME_OVERHEAD..end].to_vec(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cornflakes::{Msg, SendError};

    #[test]
    fn each_request_is_what_the_client_put_on_the_wire() {
        let reqs = capture("test requests", 3, 1500, |dp, conn, i| {
            dp.send_copy(conn, Msg::new(i as u32, 7 + i as u16), &[i as u8; 100])
        })
        .unwrap();
        assert_eq!(reqs.len(), 3);
        for (i, r) in reqs.iter().enumerate() {
            assert_eq!((r.msg_type, r.core), (7 + i as u16, 0));
            assert_eq!(r.payload, vec![i as u8; 100]);
        }
        let e = capture("big requests", 1, 1500, |dp, conn, _| {
            dp.send_copy(conn, Msg::new(0, 1), &[0u8; 4000])
        })
        .unwrap_err();
        assert!(
            e.contains("big requests") && e.contains("frames at IP MTU 1500"),
            "{e}"
        );
        let e = capture("failing requests", 1, 1500, |_, _, _| Err(SendError::Full)).unwrap_err();
        assert!(
            e.contains("failing requests: send: transmit queue full"),
            "{e}"
        );
    }
}
