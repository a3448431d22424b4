//! A copy-on-write vector of small `Copy` items (node ids, positions), in fixed-size chunks.
//!
//! The visible order and the role index of every batch snapshot are such vectors. Cloning one is
//! O(1) (one reference count). After a clone, the first write copies the list of chunk pointers
//! (n / 1024 of them) and the one chunk it touches (at most 4 KiB for `u32`), so a snapshot's
//! memory grows with what changed, not with the history. Unlike a persistent tree (the `imbl`
//! crate used before, about 12 ns a `push_back`), a vector built from a slice or an iterator is a
//! run of `memcpy`s, and reading item `i` is two loads: FILTER and TRUNCATE rebuild 100k-long
//! views in a tenth of the time.

use std::ops::{Index, Range};
use std::sync::Arc;

/// Items per chunk. Every chunk but the last is full, so item `i` is in chunk `i / CHUNK`.
const CHUNK: usize = 1024;

#[derive(Debug)]
pub struct CowVec<T> {
    chunks: Arc<Vec<Arc<Vec<T>>>>,
    len: usize,
}

impl<T> Clone for CowVec<T> {
    fn clone(&self) -> Self {
        Self {
            chunks: Arc::clone(&self.chunks),
            len: self.len,
        }
    }
}

impl<T> Default for CowVec<T> {
    fn default() -> Self {
        Self {
            chunks: Arc::new(Vec::new()),
            len: 0,
        }
    }
}

impl<T: Copy> CowVec<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A vector holding `items`. O(n), by chunk copies.
    pub fn from_slice(items: &[T]) -> Self {
        let chunks = items.chunks(CHUNK).map(|c| Arc::new(chunk_of(c))).collect();
        Self {
            chunks: Arc::new(chunks),
            len: items.len(),
        }
    }

    /// A vector holding `items`: up to one chunk's worth, `items` becomes the chunk (no copy);
    /// more are copied into chunks. O(1) or O(n).
    pub fn from_vec(items: Vec<T>) -> Self {
        if items.len() > CHUNK {
            return Self::from_slice(&items);
        }
        let len = items.len();
        let chunks = if len == 0 { Vec::new() } else { vec![Arc::new(items)] };
        Self {
            chunks: Arc::new(chunks),
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `other` is a clone of this vector that neither has changed since (O(1)). While a
    /// clone is held, any write copies, so sharing the chunks means holding the same items.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chunks, &other.chunks) && self.len == other.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Item `i`, if `i < len`. O(1).
    #[cfg(test)]
    pub fn get(&self, i: usize) -> Option<T> {
        (i < self.len).then(|| self.chunks[i / CHUNK][i % CHUNK])
    }

    #[cfg(test)]
    pub fn last(&self) -> Option<T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Append `item`. O(1), plus one chunk-list copy and one chunk copy after a clone.
    pub fn push_back(&mut self, item: T) {
        let chunks = Arc::make_mut(&mut self.chunks);
        match chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(item),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(item);
                chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }

    /// Overwrite item `i` (`i < len`). O(1), plus the copies a write after a clone makes.
    pub fn set(&mut self, i: usize, item: T) {
        assert!(i < self.len, "set: index {i} out of range for length {}", self.len);
        let chunks = Arc::make_mut(&mut self.chunks);
        Arc::make_mut(&mut chunks[i / CHUNK])[i % CHUNK] = item;
    }

    /// The items in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + Clone + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The items `range` (clamped to the length), without walking the ones before it. O(k).
    pub fn range(&self, range: Range<usize>) -> impl Iterator<Item = T> + '_ {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        let (first, last) = (start / CHUNK, end.div_ceil(CHUNK));
        self.chunks[first..last]
            .iter()
            .enumerate()
            .flat_map(move |(k, chunk)| {
                let base = (first + k) * CHUNK;
                let lo = start.saturating_sub(base);
                let hi = (end - base).min(chunk.len());
                chunk[lo..hi].iter().copied()
            })
            // Says how many items come (a flat map cannot), so callers can size for them.
            .take(end - start)
    }

    /// A new vector of the items `range` (clamped). O(k), by chunk copies.
    #[must_use]
    pub fn sub(&self, range: Range<usize>) -> Self {
        self.range(range).collect()
    }

    /// The items as one `Vec`. O(n).
    pub fn to_vec(&self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        for chunk in self.chunks.iter() {
            out.extend_from_slice(chunk);
        }
        out
    }

    #[cfg(test)]
    pub fn contains(&self, item: &T) -> bool
    where
        T: PartialEq,
    {
        self.iter().any(|x| x == item)
    }

    /// `Ok(i)` where `item` is, or `Err(i)` where it would go, in a vector sorted ascending.
    /// O(log n).
    pub fn binary_search(&self, item: &T) -> Result<usize, usize>
    where
        T: Ord,
    {
        let chunk = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|last| last < item));
        if chunk == self.chunks.len() {
            return Err(self.len);
        }
        self.chunks[chunk]
            .binary_search(item)
            .map(|i| chunk * CHUNK + i)
            .map_err(|i| chunk * CHUNK + i)
    }

    /// Insert `item` before position `i`. O(n): the vector is rebuilt (only replace uses it, when
    /// a message changes role).
    pub fn insert(&mut self, i: usize, item: T) {
        let mut items = self.to_vec();
        items.insert(i, item);
        *self = Self::from_slice(&items);
    }

    /// Remove the item at `i`. O(n), like [`CowVec::insert`].
    pub fn remove(&mut self, i: usize) -> T {
        let mut items = self.to_vec();
        let item = items.remove(i);
        *self = Self::from_slice(&items);
        item
    }

    /// Heap bytes held by this vector alone (what a snapshot costs if it shares nothing).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * size_of::<usize>()
            + self.chunks.iter().map(|c| c.capacity()).sum::<usize>() * size_of::<T>()
    }
}

/// A chunk with room for `CHUNK` items (only the last chunk of a vector ever grows).
fn chunk_of<T: Copy>(items: &[T]) -> Vec<T> {
    let mut chunk = Vec::with_capacity(if items.len() == CHUNK {
        CHUNK
    } else {
        items.len().max(16)
    });
    chunk.extend_from_slice(items);
    chunk
}

impl<T: Copy> Index<usize> for CowVec<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} out of range for length {}", self.len);
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<T: Copy> FromIterator<T> for CowVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut chunks = Vec::new();
        let mut len = 0;
        let mut iter = iter.into_iter().peekable();
        while iter.peek().is_some() {
            let mut chunk = Vec::with_capacity(CHUNK);
            chunk.extend(iter.by_ref().take(CHUNK));
            if chunk.len() < CHUNK {
                // The last chunk: room for what it holds, as `from_slice` gives it (a small view,
                // a snapshot of a short history, must not pin a whole chunk's capacity).
                chunk.shrink_to(chunk.len().max(16));
            }
            len += chunk.len();
            chunks.push(Arc::new(chunk));
        }
        Self {
            chunks: Arc::new(chunks),
            len,
        }
    }
}

#[cfg(test)]
impl<T: Copy> Extend<T> for CowVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for item in iter {
            self.push_back(item);
        }
    }
}

impl<T: Copy + PartialEq> PartialEq for CowVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(n: u32) -> CowVec<u32> {
        (0..n).collect()
    }

    #[test]
    fn builds_reads_and_slices_across_chunk_boundaries() {
        for n in [0, 1, CHUNK as u32 - 1, CHUNK as u32, CHUNK as u32 + 1, 5000] {
            let v = of(n);
            assert_eq!(v.len(), n as usize);
            assert_eq!(v.to_vec(), (0..n).collect::<Vec<_>>());
            assert_eq!(CowVec::from_slice(&v.to_vec()), v);
            let mut owned = CowVec::from_vec(v.to_vec());
            assert_eq!(owned, v);
            // Growing a vector that took its items as its chunk keeps every chunk but the last full.
            for k in 0..=CHUNK as u32 {
                owned.push_back(n + k);
            }
            assert_eq!(owned.to_vec(), (0..=n + CHUNK as u32).collect::<Vec<_>>());
            assert!(owned.chunks[..owned.chunks.len() - 1].iter().all(|c| c.len() == CHUNK));
            for (a, b) in [(0, 0), (0, 3), (1000, 1030), (1023, 2049), (4000, 9000), (7, 3)] {
                let want: Vec<u32> = (0..n).skip(a).take(b.max(a) - a).collect();
                assert_eq!(v.range(a..b).collect::<Vec<_>>(), want, "n={n} range {a}..{b}");
                assert_eq!(v.sub(a..b).to_vec(), want);
            }
            if n > 0 {
                assert_eq!(v[n as usize - 1], n - 1);
                assert_eq!(v.last(), Some(n - 1));
            }
            assert_eq!(v.get(n as usize), None);
        }
    }

    #[test]
    fn a_clone_is_unaffected_by_writes_to_the_original_and_shares_untouched_chunks() {
        let mut v = of(3000);
        let snapshot = v.clone();
        v.set(5, 99);
        v.push_back(7);
        v.set(2500, 1);
        assert_eq!(snapshot.to_vec(), (0..3000).collect::<Vec<_>>());
        assert_eq!((v[5], v[2500], v.len(), v.last()), (99, 1, 3001, Some(7)));
        // The middle chunk was not written, so both still point at the same one.
        assert!(Arc::ptr_eq(&v.chunks[1], &snapshot.chunks[1]));
        assert!(!Arc::ptr_eq(&v.chunks[0], &snapshot.chunks[0]));
    }

    #[test]
    fn a_short_vector_holds_room_for_its_items_not_a_whole_chunk() {
        let chunk_bytes = CHUNK * size_of::<u32>();
        for v in [(0..10).collect::<CowVec<u32>>(), CowVec::from_slice(&[1, 2, 3])] {
            assert!(v.heap_bytes() < chunk_bytes / 8, "{} bytes", v.heap_bytes());
        }
        let long: CowVec<u32> = (0..CHUNK as u32 + 5).collect();
        assert!(long.heap_bytes() < chunk_bytes + chunk_bytes / 8);
        assert_eq!(long.to_vec(), (0..CHUNK as u32 + 5).collect::<Vec<_>>());
    }

    #[test]
    fn sorted_search_insert_and_remove() {
        let mut v: CowVec<u32> = (0..3000).map(|i| i * 2).collect();
        assert_eq!(v.binary_search(&2048), Ok(1024));
        assert_eq!(v.binary_search(&2047), Err(1024));
        assert_eq!(v.binary_search(&10_000), Err(3000));
        assert_eq!(v.binary_search(&0), Ok(0));
        v.insert(1024, 2047);
        assert_eq!((v[1023], v[1024], v[1025], v.len()), (2046, 2047, 2048, 3001));
        assert_eq!(v.remove(0), 0);
        assert_eq!(v[0], 2);
        assert!(v.contains(&2047));
        assert!(!v.contains(&1));
    }
}
