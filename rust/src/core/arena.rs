//! The arena: every message ever stored, once, as a node with a stable id.
//!
//! Message bytes live in append-only chunks (no reallocation, so no doubling overhead and no
//! copying as the history grows); a node records where its bytes are, its role, its timestamp,
//! and `prev`/`next` links so a run of nodes can be linked into or unlinked from a [`Chain`] in
//! O(1) (the context system's pages are such runs). Nothing is ever removed: ids stay valid.

use std::ops::Range;

use crate::core::roles::Role;
use crate::core::value::ValueRef;

pub type NodeId = u32;
/// The absent link.
pub const NIL: NodeId = NodeId::MAX;

/// Chunks start small (many small stores must stay small) and double up to `CHUNK_BYTES`.
/// A message larger than the next chunk gets a chunk of its own size.
const FIRST_CHUNK_BYTES: usize = 4 << 10;
const CHUNK_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy)]
struct Span {
    chunk: u32,
    start: u32,
    len: u32,
}

#[derive(Debug, Clone)]
pub struct Node {
    span: Span,
    pub timestamp: f64,
    pub prev: NodeId,
    pub next: NodeId,
    pub role: Role,
}

#[derive(Debug, Clone, Default)]
pub struct Arena {
    nodes: Vec<Node>,
    chunks: Vec<Vec<u8>>,
}

impl Arena {
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Store one encoded message; returns its id. The node starts unlinked.
    pub fn push(&mut self, bytes: &[u8], role: Role, timestamp: f64) -> NodeId {
        assert!(
            self.nodes.len() < NIL as usize,
            "the arena holds at most 2^32 - 1 messages"
        );
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !fits {
            let next = self
                .chunks
                .last()
                .map_or(FIRST_CHUNK_BYTES, |c| (c.capacity() * 2).min(CHUNK_BYTES));
            self.chunks.push(Vec::with_capacity(next.max(bytes.len())));
        }
        let chunk_index = self.chunks.len() - 1;
        let chunk = &mut self.chunks[chunk_index];
        let start = chunk.len();
        chunk.extend_from_slice(bytes);
        self.nodes.push(Node {
            span: Span {
                chunk: chunk_index as u32,
                start: start as u32,
                len: bytes.len() as u32,
            },
            timestamp,
            prev: NIL,
            next: NIL,
            role,
        });
        (self.nodes.len() - 1) as NodeId
    }

    /// Store the encoded messages `bytes[span]` of one buffer, taken as a chunk of its own (no
    /// copy); the ids are consecutive, from the returned one. The nodes start unlinked.
    pub fn adopt(
        &mut self,
        bytes: Vec<u8>,
        messages: impl ExactSizeIterator<Item = (Range<usize>, Role, f64)>,
    ) -> NodeId {
        assert!(
            self.nodes.len() + messages.len() < NIL as usize,
            "the arena holds at most 2^32 - 1 messages"
        );
        let first = self.nodes.len() as NodeId;
        let chunk = self.chunks.len() as u32;
        self.nodes.reserve(messages.len());
        for (range, role, timestamp) in messages {
            self.nodes.push(Node {
                span: Span {
                    chunk,
                    start: range.start as u32,
                    len: range.len() as u32,
                },
                timestamp,
                prev: NIL,
                next: NIL,
                role,
            });
        }
        self.chunks.push(bytes);
        first
    }

    /// The buffer of the first chunk, taken out, for reuse once the arena is done with
    /// (an arena that [`Arena::adopt`]ed one gives it back). Empty for an empty arena.
    pub fn into_first_chunk(self) -> Vec<u8> {
        self.chunks.into_iter().next().unwrap_or_default()
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    pub fn role(&self, id: NodeId) -> Role {
        self.nodes[id as usize].role
    }

    pub fn timestamp(&self, id: NodeId) -> f64 {
        self.nodes[id as usize].timestamp
    }

    /// The stored message.
    pub fn message(&self, id: NodeId) -> ValueRef<'_> {
        ValueRef::new(self.bytes(id))
    }

    /// Where the stored message is, without reading it (a scan prefetches the ones ahead).
    pub fn bytes(&self, id: NodeId) -> &[u8] {
        let s = self.nodes[id as usize].span;
        &self.chunks[s.chunk as usize][s.start as usize..(s.start + s.len) as usize]
    }

    /// Heap bytes held (chunk and node capacity).
    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() + self.nodes.capacity() * size_of::<Node>()
    }
}

/// A doubly linked list threaded through arena nodes: O(1) append, and O(1) linking or
/// unlinking of a whole run `head..=tail` whose length the caller knows.
#[derive(Debug, Clone, Copy)]
pub struct Chain {
    pub head: NodeId,
    pub tail: NodeId,
    pub len: usize,
}

impl Default for Chain {
    fn default() -> Self {
        Self {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl Chain {
    pub fn push_back(&mut self, arena: &mut Arena, id: NodeId) {
        self.link_run_after(arena, self.tail, id, id, 1);
    }

    /// Link the unlinked run `head..=tail` (already linked among itself) after `after`
    /// (`NIL`: at the front). O(1).
    pub fn link_run_after(&mut self, arena: &mut Arena, after: NodeId, head: NodeId, tail: NodeId, count: usize) {
        let next = if after == NIL {
            self.head
        } else {
            arena.nodes[after as usize].next
        };
        arena.nodes[head as usize].prev = after;
        arena.nodes[tail as usize].next = next;
        if after == NIL {
            self.head = head;
        } else {
            arena.nodes[after as usize].next = head;
        }
        if next == NIL {
            self.tail = tail;
        } else {
            arena.nodes[next as usize].prev = tail;
        }
        self.len += count;
    }

    /// Unlink the run `head..=tail` of `count` nodes; the run stays linked among itself. O(1).
    pub fn unlink_run(&mut self, arena: &mut Arena, head: NodeId, tail: NodeId, count: usize) {
        let prev = arena.nodes[head as usize].prev;
        let next = arena.nodes[tail as usize].next;
        if prev == NIL {
            self.head = next;
        } else {
            arena.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            arena.nodes[next as usize].prev = prev;
        }
        arena.nodes[head as usize].prev = NIL;
        arena.nodes[tail as usize].next = NIL;
        self.len -= count;
    }

    /// The ids from head to tail.
    pub fn iter<'a>(&self, arena: &'a Arena) -> impl Iterator<Item = NodeId> + 'a {
        let mut at = self.head;
        std::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let id = at;
            at = arena.nodes[id as usize].next;
            Some(id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::value::Encoder;

    fn arena_of(n: usize) -> (Arena, Vec<NodeId>) {
        let mut arena = Arena::default();
        let ids = (0..n)
            .map(|i| {
                let mut buf = Vec::new();
                Encoder::new(&mut buf).str(&format!("m{i}"));
                arena.push(&buf, Role::User, i as f64)
            })
            .collect();
        (arena, ids)
    }

    #[test]
    fn messages_are_stored_once_and_read_back_by_id() {
        let (arena, ids) = arena_of(3);
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(arena.message(1).as_str(), Some("m1"));
        assert_eq!(arena.timestamp(2), 2.0);
    }

    #[test]
    fn large_messages_get_their_own_chunk() {
        let mut arena = Arena::default();
        let big = "x".repeat(CHUNK_BYTES + 10);
        let mut buf = Vec::new();
        Encoder::new(&mut buf).str(&big);
        let a = arena.push(&buf, Role::Tool, 0.0);
        let mut small = Vec::new();
        Encoder::new(&mut small).str("after");
        let b = arena.push(&small, Role::Tool, 0.0);
        assert_eq!(arena.message(a).as_str(), Some(big.as_str()));
        assert_eq!(arena.message(b).as_str(), Some("after"));
    }

    #[test]
    fn runs_unlink_and_relink_in_constant_time() {
        let (mut arena, ids) = arena_of(6);
        let mut chain = Chain::default();
        for &id in &ids {
            chain.push_back(&mut arena, id);
        }
        assert_eq!(chain.iter(&arena).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
        chain.unlink_run(&mut arena, 1, 3, 3);
        assert_eq!(chain.iter(&arena).collect::<Vec<_>>(), [0, 4, 5]);
        assert_eq!(chain.len, 3);
        // The unlinked run is still a run.
        assert_eq!(arena.node(1).next, 2);
        assert_eq!(arena.node(3).next, NIL);
        chain.link_run_after(&mut arena, 5, 1, 3, 3);
        assert_eq!(chain.iter(&arena).collect::<Vec<_>>(), [0, 4, 5, 1, 2, 3]);
        assert_eq!(chain.tail, 3);
        chain.unlink_run(&mut arena, 0, 0, 1);
        chain.link_run_after(&mut arena, NIL, 0, 0, 1);
        assert_eq!(chain.head, 0);
        chain.unlink_run(&mut arena, 0, 3, 6);
        assert_eq!((chain.head, chain.tail, chain.len), (NIL, NIL, 0));
    }
}
