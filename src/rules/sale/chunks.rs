//! Storage that grows without moving: a sale's records and buyer
//! quantities (`Chunked`) and its names and client ids (`Arena`).

use std::ops::{Index, IndexMut};

/// Elements per chunk of a `Chunked` (records: 128 KiB).
pub(super) const CHUNK_BITS: u32 = 12;
pub(super) const CHUNK: usize = 1 << CHUNK_BITS;

/// A vector kept in chunks of `CHUNK` elements, so growing never moves what
/// is stored. A doubling `Vec` copies everything when it grows (the
/// module's allocator has no realloc: a growth is allocate, copy, free):
/// 64 MiB of records at 2M reservations in one command, every client
/// waiting, and up to half of the new block unused afterwards. Chunks waste
/// at most one chunk; the first grows like a `Vec`, so a small sale stays
/// small.
#[derive(Clone, Debug)]
pub(super) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Chunked<T> {
    #[inline]
    pub(super) fn new() -> Chunked<T> {
        Chunked { chunks: Vec::new(), len: 0 }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    #[inline]
    pub(super) fn last(&self) -> Option<&T> {
        self.chunks.last()?.last()
    }

    #[inline]
    pub(super) fn push(&mut self, v: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => {
                if c.len() == c.capacity() {
                    c.reserve_exact((c.capacity() * 2).clamp(4, CHUNK) - c.len());
                }
                c.push(v);
            }
            _ => {
                let mut c = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                c.push(v);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    /// Room for `n` elements in the first chunk (the rest come a chunk at a
    /// time anyway).
    pub(super) fn reserve_first(&mut self, n: usize) {
        if self.chunks.is_empty() && n > 0 {
            self.chunks.push(Vec::with_capacity(n.min(CHUNK)));
        }
    }

    pub(super) fn shrink_last(&mut self) {
        if let Some(c) = self.chunks.last_mut() {
            c.shrink_to_fit();
        }
    }

    /// The chunks themselves, for the owners' checks.
    #[cfg(test)]
    pub(super) fn chunks(&self) -> &[Vec<T>] {
        &self.chunks
    }

    pub(super) fn bytes(&self) -> usize {
        let each = std::mem::size_of::<T>();
        self.chunks.capacity() * std::mem::size_of::<Vec<T>>() + self.chunks.iter().map(|c| c.capacity() * each).sum::<usize>()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

/// Arena chunk size; an offset is `chunk << ARENA_BITS | position`.
const ARENA_BITS: u32 = 16;
pub(super) const ARENA_CHUNK: usize = 1 << ARENA_BITS;

/// User ids and client ids, each as `len - 1` then the bytes, in chunks that
/// never move (as `Chunked`). An entry never straddles two chunks (at most
/// 257 bytes of a 64 KiB chunk are left unused), and no offset is `NONE`:
/// the last possible position of the last chunk cannot hold an entry.
#[derive(Clone, Debug, Default)]
pub(super) struct Arena {
    chunks: Vec<Vec<u8>>,
}

impl Arena {
    #[inline]
    pub(super) fn get(&self, off: u32) -> &[u8] {
        let c = &self.chunks[(off >> ARENA_BITS) as usize];
        let at = off as usize & (ARENA_CHUNK - 1);
        let len = c[at] as usize + 1;
        &c[at + 1..at + 1 + len]
    }

    /// Whether `entries` more entries get offsets that fit in 32 bits (each
    /// may open a chunk).
    #[inline]
    pub(super) fn has_room(&self, entries: usize) -> bool {
        self.chunks.len() + entries <= 1 << (32 - ARENA_BITS)
    }

    /// Stores `bytes` (1 to 256 of them) and returns their offset.
    #[inline]
    pub(super) fn intern(&mut self, bytes: &[u8]) -> u32 {
        let need = bytes.len() + 1;
        if self.chunks.last().is_none_or(|c| c.len() + need > ARENA_CHUNK) {
            let first = self.chunks.is_empty();
            self.chunks.push(Vec::with_capacity(if first { need.max(64) } else { ARENA_CHUNK }));
        }
        let n = self.chunks.len() - 1;
        let c = &mut self.chunks[n];
        if c.len() + need > c.capacity() {
            c.reserve_exact((c.capacity() * 2).clamp(c.len() + need, ARENA_CHUNK) - c.len());
        }
        let off = (n << ARENA_BITS | c.len()) as u32;
        c.push((bytes.len() - 1) as u8);
        c.extend_from_slice(bytes);
        off
    }

    /// Room for about `bytes` in the first chunk (RDB load).
    pub(super) fn reserve_first(&mut self, bytes: usize) {
        if self.chunks.is_empty() && bytes > 0 {
            self.chunks.push(Vec::with_capacity(bytes.min(ARENA_CHUNK)));
        }
    }

    pub(super) fn shrink_last(&mut self) {
        if let Some(c) = self.chunks.last_mut() {
            if c.capacity() > c.len() + c.len() / 4 + 64 {
                c.shrink_to_fit();
            }
        }
    }

    #[cfg(test)]
    pub(super) fn chunks(&self) -> &[Vec<u8>] {
        &self.chunks
    }

    pub(super) fn bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Vec<u8>>() + self.chunks.iter().map(Vec::capacity).sum::<usize>()
    }
}
