//! The pair facts of every stored message, by node id, so that a scan of the visible messages
//! never reads their encodings.
//!
//! Reading a message's encoding costs a cache miss per message (the first byte of each of
//! 100k messages scattered over 50 MB: about 90% of a scan's time, measured). Stored messages never
//! change, so their facts are read once, when a scan first meets them, into this compact table
//! (8 bytes a message, plus 8 bytes and the text of each id: about 22 bytes a message on agent
//! histories, measured). Later scans read only the table. It grows with the arena and never
//! shrinks; a copy of the store copies it.

use parking_lot::{Mutex, MutexGuard};

use crate::core::arena::{Arena, NodeId};
use crate::core::pairs::{Facts, Kind, stored_kind};

/// How many messages ahead `extend` asks for: the first read of each message is a cache miss, and
/// asking early lets several be in flight at once (a first scan of 100k messages: 29-32 ms without,
/// 16-21 ms with, on the loaded 2-core development machine; 8 to 32 ahead measured alike).
const PREFETCH_AHEAD: usize = 16;

/// Ask the CPU to bring the start of `bytes` into cache.
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: a prefetch is only a hint: it cannot fault and reads nothing into the program, and
    // `bytes` is a live slice anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// An id with no text (missing, not a string, or empty).
const NO_ID: (u32, u32) = (u32::MAX, 0);

#[derive(Debug, Default, Clone)]
pub struct PairIndex {
    /// Per node: its kind and the end of its ids in `ids`.
    nodes: Vec<(Kind, u32)>,
    /// Per id: `(start, len)` of its text in `text`, or [`NO_ID`].
    ids: Vec<(u32, u32)>,
    text: String,
}

impl PairIndex {
    /// Read the facts of the nodes stored since the last call. O(new nodes).
    pub fn extend(&mut self, arena: &Arena) {
        // A first scan of a long history more than doubles the tables: trim them afterwards
        // (doubling could leave half of them unused); small extensions keep amortized growth.
        let first = arena.len() > 2 * self.nodes.len() + 1024;
        for id in self.nodes.len()..arena.len() {
            if id + PREFETCH_AHEAD < arena.len() {
                prefetch(arena.bytes((id + PREFETCH_AHEAD) as NodeId));
            }
            let id = id as NodeId;
            let kind = stored_kind(arena.role(id), arena.message(id), &mut |text| {
                let span = match text {
                    Some(s) if !s.is_empty() => {
                        let start = self.text.len() as u32;
                        self.text.push_str(s);
                        (start, s.len() as u32)
                    }
                    _ => NO_ID,
                };
                self.ids.push(span);
            });
            self.nodes.push((kind, self.ids.len() as u32));
        }
        if first {
            self.nodes.shrink_to_fit();
            self.ids.shrink_to_fit();
            self.text.shrink_to_fit();
        }
    }

    /// The facts of `nodes` (`count` of them), in order, each already indexed. O(n + their ids).
    pub fn facts(&self, nodes: impl Iterator<Item = NodeId>, count: usize) -> Facts<'_> {
        let mut facts = Facts::with_capacity(count);
        for id in nodes {
            let id = id as usize;
            let start = if id == 0 { 0 } else { self.nodes[id - 1].1 as usize };
            let (kind, end) = self.nodes[id];
            for &(at, len) in &self.ids[start..end as usize] {
                let text = (at != NO_ID.0).then(|| &self.text[at as usize..(at + len) as usize]);
                facts.push_id(text);
            }
            facts.finish(kind);
        }
        facts
    }
}

/// The index of a store, extended by the scans (not by appends: indexing as messages are stored
/// made building a history 15-25% slower, measured), behind its own lock so that a scan holding only
/// the store's read lock can extend it. A copy of the store copies the index.
#[derive(Debug, Default)]
pub struct PairCache(Mutex<PairIndex>);

impl PairCache {
    /// The index, extended to every node of `arena`.
    pub fn indexed(&self, arena: &Arena) -> MutexGuard<'_, PairIndex> {
        let mut index = self.0.lock();
        index.extend(arena);
        index
    }
}

impl Clone for PairCache {
    fn clone(&self) -> Self {
        Self(Mutex::new(self.0.lock().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::pairs::scan;
    use crate::core::roles::Role;
    use crate::core::value::Encoder;

    fn push(arena: &mut Arena, role: Role, key: &str, id: &str) {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let d = e.open_dict(1);
        e.key(key);
        if key == "tool_calls" {
            let l = e.open_list(1);
            let c = e.open_dict(1);
            e.key("id");
            e.str(id);
            e.close(c);
            e.close(l);
        } else {
            e.str(id);
        }
        e.close(d);
        arena.push(&buf, role, 0.0);
    }

    #[test]
    fn indexes_new_nodes_only_and_gives_the_facts_of_any_order() {
        let mut arena = Arena::default();
        push(&mut arena, Role::Assistant, "tool_calls", "x");
        push(&mut arena, Role::Tool, "tool_call_id", "x");
        let cache = PairCache::default();
        assert!(scan(&cache.indexed(&arena).facts([0, 1].into_iter(), 2)).is_empty());
        push(&mut arena, Role::Tool, "tool_call_id", "");
        push(&mut arena, Role::User, "content", "plain");
        let index = cache.indexed(&arena);
        assert_eq!(index.nodes.len(), 4);
        assert_eq!(index.text, "xx");
        let found: Vec<_> = scan(&index.facts([1, 0, 3, 2].into_iter(), 4))
            .iter()
            .map(|r| (r.index, r.reason.code()))
            .collect();
        assert_eq!(found, [(0, "orphan"), (1, "unanswered"), (3, "no_id")]);
    }

    #[test]
    fn a_copy_keeps_what_was_indexed() {
        let mut arena = Arena::default();
        push(&mut arena, Role::Tool, "tool_call_id", "x");
        let cache = PairCache::default();
        drop(cache.indexed(&arena));
        assert_eq!(cache.clone().0.lock().nodes.len(), 1);
    }
}
