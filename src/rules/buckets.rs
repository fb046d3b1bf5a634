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
        if self.remaining.len() == 1 {
            return 0; // one bucket (the default): no hash to compute
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in user {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h % self.remaining.len() as u64) as u32
    }

    /// Taking all `qty` units from `bucket`, if it has them: what
    /// `plan_take` plans first.
    pub fn take_from(&self, bucket: u32, qty: u64) -> Option<Take> {
        let left = *self.remaining.get(bucket as usize)?;
        (qty > 0 && left >= qty).then_some(Take { bucket, qty })
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

    pub fn allocation(&self) -> &[u64] {
        &self.allocation
    }

    /// Plans sending `qty` units away (SECKILL.SEND): from the fullest
    /// buckets first, levelling them down, so the stock left stays spread
    /// over the buckets and buyers keep finding it in their home bucket.
    /// `None` when fewer than `qty` remain.
    pub fn plan_send(&self, qty: u64) -> Option<Vec<Take>> {
        if qty == 0 || self.total_remaining() < qty {
            return None;
        }
        let above = |level: u64| self.remaining.iter().map(|&r| r.saturating_sub(level)).sum::<u64>();
        // The lowest level whose excess is below `qty` (level 0 holds it all).
        let level = lowest(0, self.remaining.iter().copied().max().unwrap_or(0), |l| above(l) < qty);
        let mut extra = qty - above(level);
        let mut takes = Vec::new();
        for (i, &r) in self.remaining.iter().enumerate() {
            let one = u64::from(extra > 0 && r >= level && level > 0);
            extra -= one;
            push_take(&mut takes, i, r.saturating_sub(level) + one);
        }
        Some(takes)
    }

    /// Plans crediting `qty` received units (SECKILL.RECV): to the emptiest
    /// buckets first, levelling them up.
    pub fn plan_credit(&self, qty: u64) -> Vec<Take> {
        let below = |level: u64| self.remaining.iter().map(|&r| level.saturating_sub(r)).fold(0u64, u64::saturating_add);
        // Past `top` the shortfall is more than `qty` for sure.
        let top = self.remaining.iter().copied().min().unwrap_or(0).saturating_add(qty).saturating_add(1);
        // The highest level whose shortfall is at most `qty`.
        let level = lowest(0, top, |l| below(l) > qty).saturating_sub(1);
        let mut extra = qty - below(level);
        let mut takes = Vec::new();
        for (i, &r) in self.remaining.iter().enumerate() {
            let one = u64::from(extra > 0 && r <= level);
            extra -= one;
            push_take(&mut takes, i, level.saturating_sub(r) + one);
        }
        takes
    }

    /// Whether `takes` name distinct buckets with positive amounts (the
    /// form transfer effects use) summing to `qty` without overflow.
    pub fn valid_transfer(&self, takes: &[Take], qty: u64) -> bool {
        let mut seen = vec![false; self.remaining.len()];
        let mut sum: u64 = 0;
        for t in takes {
            let Some(slot) = seen.get_mut(t.bucket as usize) else { return false };
            if *slot || t.qty == 0 {
                return false;
            }
            *slot = true;
            sum = match sum.checked_add(t.qty) {
                Some(s) => s,
                None => return false,
            };
        }
        sum == qty
    }

    /// Sends units away: they leave the remainders and the allocations
    /// alike, so a later release never gives back above what is left.
    /// Callers check with `can_take`.
    pub fn send(&mut self, takes: &[Take]) {
        for t in takes {
            let i = t.bucket as usize;
            self.remaining[i] = self.remaining[i].saturating_sub(t.qty);
            self.allocation[i] = self.allocation[i].saturating_sub(t.qty);
        }
    }

    /// Credits received units to remainders and allocations alike. Callers
    /// keep the sale within `MAX_TOTAL`, so nothing overflows.
    pub fn credit(&mut self, takes: &[Take]) {
        for t in takes {
            let i = t.bucket as usize;
            self.remaining[i] = self.remaining[i].saturating_add(t.qty);
            self.allocation[i] = self.allocation[i].saturating_add(t.qty);
        }
    }

    /// Buckets with these allocations, all full (an AOF rewrite or an RDB
    /// load restores them before the records take their stock again).
    pub fn with_allocation(allocation: Vec<u64>) -> Buckets {
        Buckets { remaining: allocation.clone(), allocation }
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

/// The lowest `l` in `lo..=hi` with `pred(l)`, for a `pred` that turns
/// true once and stays true (`hi` when none before it is).
fn lowest(mut lo: u64, mut hi: u64, pred: impl Fn(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

fn push_take(takes: &mut Vec<Take>, bucket: usize, qty: u64) {
    if qty > 0 {
        takes.push(Take { bucket: bucket as u32, qty });
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
        assert_eq!(plan, vec![Take { bucket: 3, qty: 1 }, Take { bucket: 0, qty: 1 }, Take { bucket: 1, qty: 1 }]);
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
    fn send_levels_the_fullest_buckets_down() {
        let b = Buckets { allocation: vec![9, 5, 7, 1], remaining: vec![9, 5, 7, 1] };
        // Down to 6 (9 -> 6, 7 -> 6: 4 units), the last unit from the first.
        assert_eq!(b.plan_send(5), Some(vec![Take { bucket: 0, qty: 4 }, Take { bucket: 2, qty: 1 }]));
        assert_eq!(b.plan_send(7), Some(vec![Take { bucket: 0, qty: 5 }, Take { bucket: 2, qty: 2 }]));
        assert_eq!(b.plan_send(22).map(|t| t.iter().map(|t| t.qty).sum::<u64>()), Some(22));
        assert_eq!(b.plan_send(23), None);
        assert_eq!(b.plan_send(0), None);
    }

    #[test]
    fn credit_levels_the_emptiest_buckets_up() {
        let b = Buckets { allocation: vec![9, 5, 7, 1], remaining: vec![9, 5, 7, 1] };
        assert_eq!(b.plan_credit(4), vec![Take { bucket: 3, qty: 4 }]);
        assert_eq!(b.plan_credit(6), vec![Take { bucket: 1, qty: 1 }, Take { bucket: 3, qty: 5 }]);
        assert!(b.plan_credit(0).is_empty());
    }

    #[test]
    fn sent_units_leave_the_allocation() {
        let mut b = Buckets::new(4, 2);
        b.send(&[Take { bucket: 0, qty: 2 }]);
        assert_eq!((b.remaining(), b.allocation()), (&[0, 2][..], &[0, 2][..]));
        // Nothing given back to a bucket whose units were sent away.
        assert_eq!(b.give_back(&[Take { bucket: 0, qty: 1 }]), 0);
        b.credit(&[Take { bucket: 0, qty: 3 }]);
        assert_eq!((b.remaining(), b.allocation()), (&[3, 2][..], &[3, 2][..]));
        assert!(b.valid_transfer(&[Take { bucket: 1, qty: 2 }], 2));
        assert!(!b.valid_transfer(&[Take { bucket: 1, qty: 1 }, Take { bucket: 1, qty: 1 }], 2));
        assert!(!b.valid_transfer(&[Take { bucket: 2, qty: 2 }], 2));
        assert!(!b.valid_transfer(&[Take { bucket: 0, qty: 0 }, Take { bucket: 1, qty: 2 }], 2));
    }

    proptest::proptest! {
        #![proptest_config(crate::model_tests::pt_config())]

        /// Plans add up, never overdraw, and level: after a send no bucket
        /// that gave is below one that did not give, and after a credit no
        /// bucket that got is above one that did not (by more than a unit).
        #[test]
        fn plans_level(rem in proptest::collection::vec(0u64..50, 1..8), qty in 1u64..200) {
            let b = Buckets { allocation: rem.clone(), remaining: rem.clone() };
            let total: u64 = rem.iter().sum();
            match b.plan_send(qty) {
                None => proptest::prop_assert!(qty > total),
                Some(takes) => {
                    proptest::prop_assert!(b.valid_transfer(&takes, qty) && b.can_take(&takes));
                    let mut after = b.clone();
                    after.send(&takes);
                    let gave: Vec<bool> = (0..rem.len()).map(|i| takes.iter().any(|t| t.bucket as usize == i)).collect();
                    let low = (0..rem.len()).filter(|&i| gave[i]).map(|i| after.remaining[i]).min();
                    let high = (0..rem.len()).filter(|&i| !gave[i]).map(|i| after.remaining[i]).max();
                    if let (Some(l), Some(h)) = (low, high) {
                        proptest::prop_assert!(l + 1 >= h, "{:?} -> {:?}", rem, after.remaining);
                    }
                }
            }
            let credits = b.plan_credit(qty);
            proptest::prop_assert!(b.valid_transfer(&credits, qty));
            let mut after = b.clone();
            after.credit(&credits);
            let got: Vec<bool> = (0..rem.len()).map(|i| credits.iter().any(|t| t.bucket as usize == i)).collect();
            let high = (0..rem.len()).filter(|&i| got[i]).map(|i| after.remaining[i]).max();
            let low = (0..rem.len()).filter(|&i| !got[i]).map(|i| after.remaining[i]).min();
            if let (Some(h), Some(l)) = (high, low) {
                proptest::prop_assert!(h <= l + 1, "{:?} -> {:?}", rem, after.remaining);
            }
        }
    }

    #[test]
    fn home_is_stable() {
        let b = Buckets::new(100, 16);
        assert_eq!(b.home_of(b"alice"), b.home_of(b"alice"));
        assert!(b.home_of(b"bob") < 16);
    }
}
