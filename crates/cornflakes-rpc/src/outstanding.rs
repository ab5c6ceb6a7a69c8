//! The requests a client has sent and not yet seen answered: a fixed table indexed by message
//! id. Ids are handed out in increasing order (with gaps when other clients of the process
//! share the identity), so the oldest outstanding request is the first live slot from the
//! oldest id on and timeouts are found without a scan.

use std::time::Instant;

#[derive(Clone, Copy)]
struct Slot {
    incarnation: u64,
    id: u32,
    ty: u16,
    live: bool,
    deadline: Instant,
}

/// At most `capacity` requests (a power of two) by message id: a request's slot is its id
/// modulo the capacity, so an insert finds the table full when the request `capacity` ids
/// older is still outstanding.
pub(crate) struct Outstanding {
    slots: Box<[Slot]>,
    mask: u32,
    /// The oldest id not yet known to be answered or expired.
    oldest: u32,
    /// One past the newest id inserted.
    next: u32,
    live: usize,
}

impl Outstanding {
    /// A table for `capacity` requests (rounded up to a power of two, at least 1).
    pub(crate) fn new(capacity: usize, now: Instant) -> Outstanding {
        let cap = capacity.clamp(1, 1 << 30).next_power_of_two();
        Outstanding {
            slots: vec![
                Slot {
                    incarnation: 0,
                    id: 0,
                    ty: 0,
                    live: false,
                    deadline: now,
                };
                cap
            ]
            .into_boxed_slice(),
            mask: cap as u32 - 1,
            oldest: 0,
            next: 0,
            live: 0,
        }
    }

    /// How many requests are outstanding.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// How many requests fit.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Records request `id` of incarnation `incarnation` and type `ty`, timing out at
    /// `deadline`; false (nothing recorded) when its slot still holds an older request. `id`
    /// must come after the previous one.
    #[inline]
    pub(crate) fn insert(&mut self, incarnation: u64, id: u32, ty: u16, deadline: Instant) -> bool {
        let s = &mut self.slots[(id & self.mask) as usize];
        if s.live {
            return false;
        }
        *s = Slot {
            incarnation,
            id,
            ty,
            live: true,
            deadline,
        };
        if self.live == 0 {
            self.oldest = id;
        }
        self.live += 1;
        self.next = id.wrapping_add(1);
        true
    }

    /// Removes request `id` of incarnation `incarnation` if it is outstanding, returning its
    /// type.
    #[inline]
    pub(crate) fn take(&mut self, incarnation: u64, id: u32) -> Option<u16> {
        let s = &mut self.slots[(id & self.mask) as usize];
        if !s.live || s.id != id || s.incarnation != incarnation {
            return None;
        }
        s.live = false;
        self.live -= 1;
        Some(s.ty)
    }

    /// Removes every request whose deadline is at or before `now`, oldest first, handing each
    /// (id, type) to `expired`. Each id is looked at once over the table's life.
    pub(crate) fn expire(&mut self, now: Instant, mut expired: impl FnMut(u32, u16)) {
        while self.live > 0 && self.oldest != self.next {
            let s = &mut self.slots[(self.oldest & self.mask) as usize];
            if s.live && s.id == self.oldest {
                if s.deadline > now {
                    return;
                }
                s.live = false;
                self.live -= 1;
                expired(s.id, s.ty);
            }
            self.oldest = self.oldest.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn requests_are_taken_once_expire_oldest_first_and_the_table_is_bounded() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut t = Outstanding::new(3, t0);
        assert_eq!(t.capacity(), 4);
        for (id, ms) in [(7, 10), (8, 20), (9, 30), (10, 40)] {
            assert!(t.insert(5, id, id as u16 * 2, at(ms)));
        }
        // Id 11 would take id 7's slot, which is still outstanding.
        assert!(!t.insert(5, 11, 1, at(50)));
        assert_eq!(t.len(), 4);
        assert_eq!(t.take(6, 8), None, "another incarnation's id 8");
        assert_eq!(t.take(5, 8), Some(16));
        assert_eq!(t.take(5, 8), None, "a second reply to one request");
        assert_eq!(t.take(5, 12), None, "an id never sent (slot of id 8)");
        let mut gone = Vec::new();
        t.expire(at(30), |id, ty| gone.push((id, ty)));
        assert_eq!(gone, [(7, 14), (9, 18)]);
        assert_eq!(t.len(), 1);
        assert!(t.insert(5, 11, 22, at(50)));
        assert_eq!(t.take(5, 10), Some(20));
        gone.clear();
        t.expire(at(100), |id, ty| gone.push((id, ty)));
        assert_eq!(gone, [(11, 22)]);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn ids_wrap_around() {
        let t0 = Instant::now();
        let mut t = Outstanding::new(2, t0);
        assert!(t.insert(1, u32::MAX, 1, t0));
        assert!(t.insert(2, 0, 2, t0));
        assert!(!t.insert(2, 1, 3, t0));
        let mut gone = Vec::new();
        t.expire(t0, |id, _| gone.push(id));
        assert_eq!(gone, [u32::MAX, 0]);
        assert!(t.insert(2, 1, 3, t0));
        assert_eq!(t.take(2, 1), Some(3));
    }

    #[test]
    fn ids_with_gaps_expire_in_order() {
        // Another client of the process took ids 2 and 4.
        let t0 = Instant::now();
        let mut t = Outstanding::new(8, t0);
        for id in [1, 3, 5] {
            assert!(t.insert(9, id, 0, t0));
        }
        let mut gone = Vec::new();
        t.expire(t0, |id, _| gone.push(id));
        assert_eq!(gone, [1, 3, 5]);
        assert_eq!(t.len(), 0);
    }
}
