//! The sale's stock, split over buckets (shards).
//!
//! Each bucket has a fixed allocation (its share of `total`) and a remaining
//! count. A reservation takes from the buyer's home bucket first and borrows
//! from the others, so the key never reports a false sold-out. Stock given
//! back goes to the bucket it came from, capped at that bucket's allocation.

/// One unit of bookkeeping: `qty` units taken from bucket `bucket`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Take {
    pub bucket: u32,
    pub qty: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Buckets {
    allocation: Vec<u64>,
    remaining: Vec<u64>,
}

impl Buckets {
    /// Splits `total` over `shards` buckets, the first `total % shards`
    /// buckets getting one unit more. All buckets start full.
    pub fn new(total: u64, shards: u32) -> Buckets {
        let n = u64::from(shards.max(1));
        let allocation: Vec<u64> = (0..n).map(|i| total / n + u64::from(i < total % n)).collect();
        Buckets { remaining: allocation.clone(), allocation }
    }

    pub fn count(&self) -> u32 {
        self.remaining.len() as u32
    }

    pub fn remaining(&self) -> &[u64] {
        &self.remaining
    }

    pub fn total_remaining(&self) -> u64 {
        self.remaining.iter().sum()
    }

    /// The buyer's home bucket: a stable FNV-1a hash of the user id, so the
    /// same user lands on the same bucket on every node and every version.
    pub fn home_of(&self, user: &[u8]) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in user {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h % self.remaining.len() as u64) as u32
    }

    /// Plans taking `qty` units starting at `home` and walking the other
    /// buckets in order. `None` when fewer than `qty` remain in all.
    pub fn plan_take(&self, home: u32, qty: u64) -> Option<Vec<Take>> {
        let n = self.remaining.len();
        let mut need = qty;
        let mut takes = Vec::with_capacity(1);
        for step in 0..n {
            if need == 0 {
                break;
            }
            let bucket = (home as usize + step) % n;
            let got = self.remaining[bucket].min(need);
            if got > 0 {
                takes.push(Take { bucket: bucket as u32, qty: got });
                need -= got;
            }
        }
        (need == 0).then_some(takes)
    }

    /// Whether `takes` can be taken as written (used for replicated effects).
    pub fn can_take(&self, takes: &[Take]) -> bool {
        if let [one] = takes {
            return self.remaining.get(one.bucket as usize).is_some_and(|&r| r >= one.qty);
        }
        let mut want = vec![0u64; self.remaining.len()];
        for t in takes {
            let Some(slot) = want.get_mut(t.bucket as usize) else {
                return false;
            };
            *slot = match slot.checked_add(t.qty) {
                Some(v) => v,
                None => return false,
            };
        }
        want.iter().zip(&self.remaining).all(|(w, r)| w <= r)
    }

    /// Takes the planned units. Callers check with `plan_take`/`can_take`.
    pub fn take(&mut self, takes: &[Take]) {
        for t in takes {
            let r = &mut self.remaining[t.bucket as usize];
            *r = r.saturating_sub(t.qty);
        }
    }

    /// Gives units back to the buckets they came from, each capped at its
    /// allocation. Returns how many units were actually given back.
    pub fn give_back(&mut self, takes: &[Take]) -> u64 {
        let mut given = 0;
        for t in takes {
            let i = t.bucket as usize;
            let room = self.allocation[i] - self.remaining[i];
            let back = t.qty.min(room);
            self.remaining[i] += back;
            given += back;
        }
        given
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_sums_to_total() {
        let b = Buckets::new(10, 3);
        assert_eq!(b.remaining(), &[4, 3, 3]);
        assert_eq!(b.total_remaining(), 10);
        assert_eq!(Buckets::new(0, 4).total_remaining(), 0);
    }

    #[test]
    fn take_borrows_from_other_buckets() {
        let mut b = Buckets::new(4, 4);
        let plan = b.plan_take(3, 3).unwrap();
        assert_eq!(
            plan,
            vec![Take { bucket: 3, qty: 1 }, Take { bucket: 0, qty: 1 }, Take { bucket: 1, qty: 1 }]
        );
        b.take(&plan);
        assert_eq!(b.remaining(), &[0, 0, 1, 0]);
        assert!(b.plan_take(0, 2).is_none());
        assert_eq!(b.give_back(&plan), 3);
        assert_eq!(b.remaining(), &[1, 1, 1, 1]);
    }

    #[test]
    fn give_back_never_passes_allocation() {
        let mut b = Buckets::new(2, 2);
        assert_eq!(b.give_back(&[Take { bucket: 0, qty: 5 }]), 0);
        assert_eq!(b.total_remaining(), 2);
    }

    #[test]
    fn can_take_rejects_unknown_bucket_and_overdraw() {
        let b = Buckets::new(2, 2);
        assert!(b.can_take(&[Take { bucket: 0, qty: 1 }, Take { bucket: 1, qty: 1 }]));
        assert!(!b.can_take(&[Take { bucket: 2, qty: 1 }]));
        assert!(!b.can_take(&[Take { bucket: 0, qty: 1 }, Take { bucket: 0, qty: 1 }]));
        assert!(!b.can_take(&[Take { bucket: 0, qty: u64::MAX }, Take { bucket: 0, qty: 2 }]));
    }

    #[test]
    fn home_is_stable() {
        let b = Buckets::new(100, 16);
        assert_eq!(b.home_of(b"alice"), b.home_of(b"alice"));
        assert!(b.home_of(b"bob") < 16);
    }
}
