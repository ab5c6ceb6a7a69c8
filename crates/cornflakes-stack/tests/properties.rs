//! Randomized properties of segmentation and reassembly: every cut of any message into pieces
//! and frames reassembles to the same bytes in any arrival order, and forged or repeated
//! segments never corrupt or complete a message wrongly.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use cornflakes::{Msg, PinnedMemory};
use cornflakes_stack::reassembly::{Drop, Reassembler, ReassemblyConfig};
use cornflakes_stack::wire::framing;
use cornflakes_stack::{Cursor, FramePlan};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

#[test]
fn cursor_parts_tile_every_frame_exactly() {
    let mut rng = SmallRng::seed_from_u64(1);
    for _ in 0..2000 {
        let per = rng.gen_range(1..200);
        let mut pieces: Vec<usize> = (0..rng.gen_range(0..12))
            .map(|_| rng.gen_range(0..400))
            .collect();
        let total: usize = pieces.iter().sum();
        let plan = FramePlan::new(total, per).unwrap();
        let mut cur = Cursor::new(plan);
        let mut per_frame = vec![0usize; plan.frames];
        let mut starts = vec![0usize; plan.frames];
        let mut ends = vec![0usize; plan.frames];
        let mut last_frame = 0;
        for (k, &len) in pieces.iter().enumerate() {
            let mut covered = 0;
            let placed = cur.feed(len, |p| {
                assert_eq!(p.offset, covered, "parts of piece {k} are contiguous");
                assert!(p.len > 0);
                assert!(p.frame >= last_frame, "frames in order");
                last_frame = p.frame;
                covered += p.len;
                per_frame[p.frame] += p.len;
                starts[p.frame] += p.starts_frame as usize;
                ends[p.frame] += p.ends_frame as usize;
            });
            assert_eq!(placed, len);
            assert_eq!(covered, len);
        }
        for i in 0..plan.frames {
            assert_eq!(per_frame[i], plan.frame_len(i));
            if total > 0 {
                assert_eq!((starts[i], ends[i]), (1, 1), "frame {i}");
            }
        }
        pieces.clear();
    }
}

fn segments(msg: &[u8], per: usize, id: u32) -> Vec<(framing::Repr, Vec<u8>)> {
    let plan = FramePlan::new(msg.len(), per).unwrap();
    (0..plan.frames)
        .map(|i| {
            let h = plan.header(i, Msg::new(id, 5));
            let a = h.seg_offset as usize;
            (h, msg[a..a + plan.frame_len(i)].to_vec())
        })
        .collect()
}

#[test]
fn any_order_reassembles_and_forgeries_are_rejected() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let peer = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 1);
    let mut rng = SmallRng::seed_from_u64(2);
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let now = Instant::now();
    let mut forgeries_caught = 0;
    for id in 0..500u32 {
        let len: usize = rng.gen_range(2..6000);
        let per = rng.gen_range(1..len).max(len.div_ceil(60));
        let msg: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let mut segs = segments(&msg, per, id);
        if segs.len() < 2 {
            continue;
        }
        segs.shuffle(&mut rng);
        let mut done = None;
        for (k, (h, p)) in segs.iter().enumerate() {
            // Before each real segment, a forged one: a random field changed.
            let mut f = *h;
            let mut fp = p.clone();
            match rng.gen_range(0..5) {
                0 => f.total_len = f.total_len.wrapping_add(rng.gen_range(1..9)),
                1 => f.seg_count = f.seg_count.wrapping_add(1),
                2 => f.seg_offset = f.seg_offset.wrapping_add(rng.gen_range(1..9)),
                3 => f.msg_type ^= 1,
                _ => fp.push(0),
            }
            let forged =
                framing::Repr::parse(&framing::Packet::new_unchecked(&framed(&f, &fp)[..]));
            if let Ok(fh) = forged {
                if fh.seg_count > 1 {
                    let res = r.push(&mem, peer, &fh, &fp, now);
                    if k > 0 {
                        // Once the message exists, any disagreement is caught.
                        assert_eq!(res, Err(Drop::BadFraming), "forged {f:?} vs {h:?}");
                        forgeries_caught += 1;
                    } else if let Ok(None) = res {
                        // A self-consistent forgery started a different message: drop it.
                        r.expire(now + std::time::Duration::from_secs(3600));
                    }
                }
            }
            match r.push(&mem, peer, h, p, now) {
                Ok(Some(m)) => done = Some(m),
                Ok(None) => {}
                Err(e) => panic!("real segment refused: {e:?}"),
            }
            if k == 0 {
                assert_eq!(r.push(&mem, peer, h, p, now), Err(Drop::Duplicate));
            }
        }
        let (m, buf) = done.expect("complete");
        assert_eq!(m, Msg::new(id, 5));
        assert_eq!(&buf[..], &msg[..]);
    }
    assert!(forgeries_caught > 500, "{forgeries_caught}");
    r.expire(now + std::time::Duration::from_secs(3600));
    assert_eq!(r.pending(), 0);
    assert_eq!(mem.stats().live_items, 0);
}

fn framed(h: &framing::Repr, p: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; framing::HEADER_LEN + p.len()];
    h.emit(&mut v);
    v[framing::HEADER_LEN..].copy_from_slice(p);
    v
}
