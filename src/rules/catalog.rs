//! The names of a node's sales, per database, in byte order: what
//! `SECKILL.SALES` pages through, so listing the sales never walks the
//! keyspace.
//!
//! Plain Rust, no FFI. The module adds a name wherever a sale comes to be
//! (INIT, a load, RESTORE, RENAME, MOVE, COPY) and drops it where one goes
//! (the type's unlink callback, FLUSHDB); an entry it missed dropping is
//! stale, and the listing drops it when its page finds no sale there. So
//! the catalog may hold a name too many for a while, never one too few.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

#[derive(Clone, Debug, Default)]
pub struct Catalog {
    dbs: BTreeMap<i32, BTreeSet<Box<[u8]>>>,
}

/// One page: the names, and the first name of the next page (`None`: the
/// listing is complete).
pub type Page = (Vec<Box<[u8]>>, Option<Box<[u8]>>);

impl Catalog {
    /// `const`, so the module can keep one in a static.
    pub const fn new() -> Catalog {
        Catalog { dbs: BTreeMap::new() }
    }

    /// Names held, across databases.
    pub fn len(&self) -> usize {
        self.dbs.values().map(BTreeSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.dbs.is_empty()
    }

    pub fn insert(&mut self, db: i32, key: &[u8]) {
        let names = self.dbs.entry(db).or_default();
        if !names.contains(key) {
            names.insert(key.into());
        }
    }

    pub fn remove(&mut self, db: i32, key: &[u8]) {
        if let Some(names) = self.dbs.get_mut(&db) {
            names.remove(key);
            if names.is_empty() {
                self.dbs.remove(&db);
            }
        }
    }

    /// FLUSHDB (`Some(db)`) or FLUSHALL (`None`).
    pub fn clear(&mut self, db: Option<i32>) {
        match db {
            Some(db) => {
                self.dbs.remove(&db);
            }
            None => self.dbs.clear(),
        }
    }

    /// SWAPDB: the two databases exchange their names.
    pub fn swap_dbs(&mut self, first: i32, second: i32) {
        let a = self.dbs.remove(&first);
        let b = self.dbs.remove(&second);
        if let Some(a) = a {
            self.dbs.insert(second, a);
        }
        if let Some(b) = b {
            self.dbs.insert(first, b);
        }
    }

    /// Drops every name `gone` says is gone (a slot given away).
    pub fn forget(&mut self, gone: impl Fn(&[u8]) -> bool) {
        for names in self.dbs.values_mut() {
            names.retain(|k| !gone(k));
        }
        self.dbs.retain(|_, names| !names.is_empty());
    }

    /// Up to `count` names of `db` from `from` on (inclusive; `None`: from
    /// the first). A name added or dropped during a listing does not
    /// disturb it: every name there from its first page to its last is
    /// listed exactly once.
    pub fn page(&self, db: i32, from: Option<&[u8]>, count: usize) -> Page {
        let Some(names) = self.dbs.get(&db) else {
            return (Vec::new(), None);
        };
        let start = match from {
            Some(k) => Bound::Included(k),
            None => Bound::Unbounded,
        };
        let mut it = names.range::<[u8], _>((start, Bound::Unbounded));
        let page: Vec<Box<[u8]>> = it.by_ref().take(count).cloned().collect();
        (page, it.next().cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(page: &[Box<[u8]>]) -> Vec<&[u8]> {
        page.iter().map(|k| &k[..]).collect()
    }

    #[test]
    fn pages_in_byte_order_and_ends() {
        let mut c = Catalog::new();
        for k in [&b"c"[..], b"a", b"b", b"a"] {
            c.insert(0, k);
        }
        assert_eq!(c.len(), 3);
        let (p, next) = c.page(0, None, 2);
        assert_eq!(names(&p), [&b"a"[..], b"b"]);
        assert_eq!(next.as_deref(), Some(&b"c"[..]));
        let (p, next) = c.page(0, next.as_deref(), 2);
        assert_eq!(names(&p), [&b"c"[..]]);
        assert_eq!(next, None);
        assert_eq!(c.page(1, None, 10), (Vec::new(), None));
    }

    #[test]
    fn a_listing_survives_changes_between_pages() {
        let mut c = Catalog::new();
        for k in [&b"a"[..], b"b", b"c", b"d"] {
            c.insert(0, k);
        }
        let (_, next) = c.page(0, None, 2);
        assert_eq!(next.as_deref(), Some(&b"c"[..]));
        // The next page's first name goes away: the page starts after it.
        c.remove(0, b"c");
        c.insert(0, b"e");
        let (p, next) = c.page(0, Some(b"c"), 10);
        assert_eq!(names(&p), [&b"d"[..], b"e"]);
        assert_eq!(next, None);
    }

    #[test]
    fn flush_swap_and_forget() {
        let mut c = Catalog::new();
        c.insert(0, b"x");
        c.insert(1, b"y");
        c.insert(1, b"z");
        c.swap_dbs(0, 1);
        assert_eq!(names(&c.page(0, None, 10).0), [&b"y"[..], b"z"]);
        assert_eq!(names(&c.page(1, None, 10).0), [&b"x"[..]]);
        c.swap_dbs(1, 5);
        assert!(c.page(1, None, 10).0.is_empty());
        assert_eq!(names(&c.page(5, None, 10).0), [&b"x"[..]]);
        c.forget(|k| k == b"y");
        assert_eq!(c.len(), 2);
        c.clear(Some(0));
        assert_eq!(c.len(), 1);
        c.clear(None);
        assert!(c.is_empty());
        c.remove(3, b"nothing");
        assert!(c.is_empty());
    }
}
