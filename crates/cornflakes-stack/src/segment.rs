//! Cutting a message into frames (datapath-independent).
//!
//! A message of `total` bytes is sent as `ceil(total / L)` frames of `L` bytes each (the last
//! one shorter), `L` being the frame's room after all headers. The message is a sequence of
//! pieces (the header-and-copy buffer, then each zero-copy entry); a [`Cursor`] splits each
//! piece at frame boundaries as it is fed, so a datapath can post descriptors straight from
//! the zero-copy iterator without collecting them first.

use cornflakes_datapath::Msg;

use crate::wire::framing;

/// How a message is cut into frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramePlan {
    /// Message bytes.
    pub total: usize,
    /// Message bytes per frame (all frames but the last carry exactly this many).
    pub per_frame: usize,
    /// Number of frames (at least 1, also for an empty message).
    pub frames: usize,
}

/// Why a message cannot be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge {
    /// Message length.
    pub len: usize,
    /// Largest length that can be framed with this frame size.
    pub max: usize,
}

impl FramePlan {
    /// Plans a message of `total` bytes with `per_frame` message bytes per frame (> 0).
    #[inline]
    pub fn new(total: usize, per_frame: usize) -> Result<FramePlan, TooLarge> {
        let per_frame = per_frame.max(1);
        if total <= per_frame {
            // The common case, one frame: no division.
            return Ok(FramePlan {
                total,
                per_frame,
                frames: 1,
            });
        }
        let max = (u16::MAX as usize * per_frame).min(u32::MAX as usize);
        if total > max {
            return Err(TooLarge { len: total, max });
        }
        Ok(FramePlan {
            total,
            per_frame,
            frames: total.div_ceil(per_frame),
        })
    }

    /// Whether the message fits one frame.
    #[inline]
    pub fn is_single(&self) -> bool {
        self.frames == 1
    }

    /// Message bytes in frame `i`.
    #[inline]
    pub fn frame_len(&self, i: usize) -> usize {
        let start = i * self.per_frame;
        self.total.saturating_sub(start).min(self.per_frame)
    }

    /// The framing header of frame `i`.
    #[inline]
    pub fn header(&self, i: usize, msg: Msg) -> framing::Repr {
        framing::Repr {
            incarnation: msg.incarnation,
            msg_type: msg.ty,
            msg_id: msg.id,
            seg_index: i as u16,
            seg_count: self.frames as u16,
            total_len: self.total as u32,
            seg_offset: (i * self.per_frame) as u32,
        }
    }
}

/// One part of a piece that falls in one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// The frame it belongs to.
    pub frame: usize,
    /// Whether it is the first part of that frame (the frame's headers go before it).
    pub starts_frame: bool,
    /// Whether it ends that frame (the frame's last descriptor).
    pub ends_frame: bool,
    /// Offset inside the piece.
    pub offset: usize,
    /// Bytes.
    pub len: usize,
}

/// Walks a message piece by piece, splitting pieces at frame boundaries.
#[derive(Clone, Debug)]
pub struct Cursor {
    plan: FramePlan,
    /// Message bytes consumed so far.
    pos: usize,
}

impl Cursor {
    /// A cursor at the start of the message.
    pub fn new(plan: FramePlan) -> Cursor {
        Cursor { plan, pos: 0 }
    }

    /// A cursor that starts after `skip` bytes already placed (e.g. the head written inline
    /// into frame 0).
    pub fn starting_at(plan: FramePlan, skip: usize) -> Cursor {
        Cursor { plan, pos: skip }
    }

    /// Message bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Feeds the next piece of `len` bytes, calling `f` for each part of it. Bytes past the
    /// planned total are ignored (a caller bug, reported by the return value: the bytes
    /// placed).
    pub fn feed(&mut self, len: usize, mut f: impl FnMut(Part)) -> usize {
        let mut off = 0;
        let per = self.plan.per_frame;
        while off < len && self.pos < self.plan.total {
            let frame = self.pos / per;
            let in_frame = self.pos - frame * per;
            let room = self.plan.frame_len(frame) - in_frame;
            let n = room.min(len - off);
            f(Part {
                frame,
                starts_frame: in_frame == 0,
                ends_frame: n == room,
                offset: off,
                len: n,
            });
            off += n;
            self.pos += n;
        }
        off
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn plan() {
        let p = FramePlan::new(250, 100).unwrap();
        assert_eq!(p.frames, 3);
        assert_eq!(
            (p.frame_len(0), p.frame_len(1), p.frame_len(2)),
            (100, 100, 50)
        );
        let h = p.header(2, Msg::new(5, 1).with_incarnation(3));
        assert_eq!((h.seg_offset, h.incarnation), (200, 3));
        assert_eq!(h.msg(), Msg::new(5, 1).with_incarnation(3));
        let e = FramePlan::new(0, 100).unwrap();
        assert_eq!(e.frames, 1);
        assert!(e.is_single());
        assert!(FramePlan::new(65535 * 10 + 1, 10).is_err());
    }

    #[test]
    fn cursor_splits_at_frame_boundaries() {
        let plan = FramePlan::new(250, 100).unwrap();
        let mut c = Cursor::new(plan);
        let mut parts = Vec::new();
        for len in [30, 150, 0, 70] {
            c.feed(len, |p| {
                parts.push((p.frame, p.starts_frame, p.ends_frame, p.offset, p.len))
            });
        }
        assert_eq!(
            parts,
            vec![
                (0, true, false, 0, 30),
                (0, false, true, 0, 70),
                (1, true, false, 70, 80),
                (1, false, true, 0, 20),
                (2, true, true, 20, 50),
            ]
        );
        assert_eq!(c.position(), 250);
        // Further bytes are refused.
        assert_eq!(c.feed(10, |_| panic!("past the end")), 0);
    }
}
