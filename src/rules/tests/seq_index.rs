//! Unit tests of `seq_index.rs` (a child module of it: `use super::*` sees its private items).

use std::collections::HashMap;
use std::hash::BuildHasher;

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

/// Keys live outside the index, as in a sale: `keys[seq]`.
struct Keys {
    keys: Vec<u64>,
    /// 0: a keyed hash; 1: three homes, varied tags; 2: one hash for all.
    mode: u8,
    hasher: std::hash::RandomState,
}

impl Keys {
    fn hash(&self, key: u64) -> u64 {
        let h = self.hasher.hash_one(key);
        match self.mode {
            0 => h,
            1 => (h & !0xff) | (key % 3),
            _ => 0x8000_0000_0000_0005,
        }
    }

    fn rehash(&self, seq: u32) -> u64 {
        self.hash(self.keys[seq as usize])
    }
}

struct Harness {
    index: SeqIndex,
    k: Keys,
    model: HashMap<u64, u32>,
}

impl Harness {
    fn new(step: usize, mode: u8) -> Harness {
        let k = Keys { keys: Vec::new(), mode, hasher: std::hash::RandomState::new() };
        Harness { index: SeqIndex::with_step(step), k, model: HashMap::new() }
    }

    fn insert(&mut self, key: u64) {
        let seq = self.k.keys.len() as u32;
        self.k.keys.push(key);
        let k = &self.k;
        let got = self.index.find_or_insert(k.hash(key), seq, |s| k.keys[s as usize] == key, |s| k.rehash(s));
        assert_eq!(got.map(|v| *v), self.model.get(&key).copied(), "find_or_insert({key})");
        self.model.entry(key).or_insert(seq);
    }

    /// A newer seq for an existing key (a buyer's new head).
    fn replace(&mut self, key: u64) {
        let seq = self.k.keys.len() as u32;
        self.k.keys.push(key);
        let k = &self.k;
        match self.index.get_mut(k.hash(key), |s| k.keys[s as usize] == key) {
            Some(v) => {
                assert_eq!(Some(*v), self.model.get(&key).copied());
                *v = seq;
                self.model.insert(key, seq);
            }
            None => assert!(!self.model.contains_key(&key), "get_mut({key}) missed"),
        }
    }

    fn remove(&mut self, key: u64) {
        let k = &self.k;
        let got = self.index.remove(k.hash(key), |s| k.keys[s as usize] == key, |s| k.rehash(s));
        assert_eq!(got, self.model.remove(&key), "remove({key})");
    }

    fn shrink(&mut self) {
        let k = &self.k;
        self.index.shrink_to_fit(|s| k.rehash(s));
    }

    fn check(&self) {
        let k = &self.k;
        self.index.check(|s| k.rehash(s)).unwrap();
        assert_eq!(self.index.len(), self.model.len());
        assert_eq!(self.index.is_empty(), self.model.is_empty());
        for (&key, &seq) in &self.model {
            assert_eq!(self.index.find(k.hash(key), |s| k.keys[s as usize] == key), Some(seq), "find({key})");
        }
        for key in u64::MAX - 3..=u64::MAX {
            assert_eq!(self.index.find(k.hash(key), |s| k.keys[s as usize] == key), None);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    Replace(u64),
    Remove(u64),
    Shrink,
}

fn op() -> impl Strategy<Value = Op> {
    // Keys from a small range so that inserts meet existing keys and
    // removes find them; now and then a shrink (RDB load).
    prop_oneof![
        6 => (0u64..300).prop_map(Op::Insert),
        2 => (0u64..300).prop_map(Op::Replace),
        4 => (0u64..300).prop_map(Op::Remove),
        1 => Just(Op::Shrink),
    ]
}

proptest! {
    #![proptest_config(crate::model_tests::pt_config())]

    /// The index agrees with a HashMap after every operation: with
    /// migrations of 1 to 3 slots per call (most operations land in the
    /// middle of one, and 1 forces the full drain), with the production
    /// step, and with hashes that collide on purpose.
    #[test]
    fn index_matches_hashmap(
        step in prop_oneof![1usize..=3, Just(MIGRATE_SLOTS)],
        mode in 0u8..3,
        ops in vec(op(), 1..400),
    ) {
        let mut h = Harness::new(step, mode);
        for op in &ops {
            match *op {
                Op::Insert(key) => h.insert(key),
                Op::Replace(key) => h.replace(key),
                Op::Remove(key) => h.remove(key),
                Op::Shrink => h.shrink(),
            }
            h.check();
        }
    }
}

/// With the production step, a growth never waits: its table was
/// zeroed over the inserts before it, and the last growth's old table
/// is drained.
#[test]
fn growth_is_prepared_and_drained_in_time() {
    let mut h = Harness::new(MIGRATE_SLOTS, 0);
    let (mut migrating, mut growths) = (0, 0);
    for key in 0..40_000u64 {
        let cap = h.index.live.cap();
        if h.index.len() >= max_len(cap) {
            assert!(!h.index.migrating(), "a growth at {key} while the last one is under way");
            if cap >= 128 {
                assert_eq!(h.index.next.cap(), 2 * cap, "a growth at {key} with its table not ready");
                growths += 1;
            }
        } else if h.index.len() + cap / 128 < max_len(cap) {
            assert_eq!(h.index.next.bytes(), 0, "a table prepared long before its growth");
        }
        h.insert(key);
        migrating += usize::from(h.index.migrating());
    }
    h.check();
    assert!(migrating > 0 && growths >= 8);
}

#[test]
fn deletions_in_the_middle_of_a_migration() {
    let mut h = Harness::new(2, 0);
    for key in 0..56 {
        h.insert(key);
    }
    h.insert(56); // 56 of 64 slots: the next table (128) takes over
    assert!(h.index.migrating());
    // Removes hit both tables (which one depends on the keyed hash).
    for key in (0..57).step_by(2) {
        h.remove(key);
        h.check();
    }
    for key in 100..130 {
        h.insert(key);
        h.check();
    }
    assert!(!h.index.migrating());
}

#[test]
fn empties_and_tiny_tables() {
    let mut h = Harness::new(MIGRATE_SLOTS, 2);
    h.remove(5);
    h.shrink();
    h.check();
    assert_eq!(h.index.allocation_size(), 0);
    for key in 0..7 {
        h.insert(key);
    }
    assert_eq!(h.index.live.cap(), 8);
    for key in 0..7 {
        h.remove(key);
        h.check();
    }
    h.insert(3);
    h.remove(3);
    h.shrink();
    h.check();
    assert_eq!(h.index.allocation_size(), 0);
}

#[test]
fn with_capacity_never_grows() {
    let mut index = SeqIndex::with_capacity(1000);
    let cap = index.live.cap();
    for s in 0..1000u32 {
        index.insert_unique(u64::from(s).wrapping_mul(0x9e37_79b9_7f4a_7c15), s, |_| unreachable!());
    }
    assert_eq!((index.live.cap(), index.len()), (cap, 1000));
}
