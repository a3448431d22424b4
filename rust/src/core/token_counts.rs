//! Token counts kept beside the store: each stored message's count per encoding, computed when
//! first needed (a stored message never changes, so neither does its count), and each view's
//! running total, so that `token_count()` is O(1) once counted and a budget check never
//! re-tokenizes. Counts are keyed by node id, so they survive snapshots and rollback untouched.
//! Beside each count, the tokens of the message's thinking, kept only for the few messages that
//! have some: what the message costs less in an earlier turn ([`crate::core::tokens::Thinking`]).

use std::collections::HashMap;

use rayon::prelude::*;

use crate::core::arena::{Arena, NodeId};
use crate::core::tokens::Encoding;

/// Not counted yet.
const UNKNOWN: u32 = u32::MAX;
/// Below this many messages to count, one core does it (threads cost more than they save).
const PARALLEL_FROM: usize = 256;

/// Per encoding, the count of each stored message by node id (`UNKNOWN` until counted), and the
/// tokens of its thinking when it has any.
#[derive(Clone, Default, Debug)]
pub struct TokenCounts {
    counts: [Vec<u32>; Encoding::ALL.len()],
    thinking: [HashMap<NodeId, u32>; Encoding::ALL.len()],
}

impl TokenCounts {
    /// The cached count of `id`, if it has been counted.
    pub fn get(&self, encoding: Encoding, id: NodeId) -> Option<u64> {
        match self.counts[encoding.index()].get(id as usize) {
            Some(&c) if c != UNKNOWN => Some(u64::from(c)),
            _ => None,
        }
    }

    /// The count of `id`, counted now if it was not. O(1) when cached.
    pub fn count(&mut self, arena: &Arena, encoding: Encoding, id: NodeId) -> u64 {
        if let Some(c) = self.get(encoding, id) {
            return c;
        }
        let parts = encoding.count_message_parts(arena.message(id));
        self.set(encoding, id, parts);
        parts.0
    }

    /// The tokens of the thinking of `id` (0 for a message without any), once it is counted.
    pub fn thinking(&self, encoding: Encoding, id: NodeId) -> u64 {
        let table = &self.thinking[encoding.index()];
        // Most histories have no thinking at all: no hashing then, in a trim's inner loop.
        if table.is_empty() {
            return 0;
        }
        table.get(&id).map_or(0, |&t| u64::from(t))
    }

    /// Whether any message counted in `encoding` has thinking.
    pub fn any_thinking(&self, encoding: Encoding) -> bool {
        !self.thinking[encoding.index()].is_empty()
    }

    fn set(&mut self, encoding: Encoding, id: NodeId, (count, thinking): (u64, u64)) {
        let table = &mut self.counts[encoding.index()];
        if table.len() <= id as usize {
            table.resize(id as usize + 1, UNKNOWN);
        }
        // A message of 4 billion tokens cannot be stored (spans are u32 bytes), so neither saturates.
        table[id as usize] = u32::try_from(count).unwrap_or(UNKNOWN - 1);
        if thinking > 0 {
            self.thinking[encoding.index()].insert(id, u32::try_from(thinking).unwrap_or(UNKNOWN - 1));
        }
    }

    /// Give node `to` of `into` what is known of node `from` here (its count and thinking in every
    /// encoding): how the context window keeps its counts when it compacts its arena.
    pub fn carry(&self, from: NodeId, into: &mut TokenCounts, to: NodeId) {
        for encoding in Encoding::ALL {
            if let Some(count) = self.get(encoding, from) {
                into.set(encoding, to, (count, self.thinking(encoding, from)));
            }
        }
    }

    /// Count every one of `ids` not counted yet, on all cores when there are many.
    pub fn fill(&mut self, arena: &Arena, encoding: Encoding, ids: impl Iterator<Item = NodeId>) {
        let missing: Vec<NodeId> = ids.filter(|&id| self.get(encoding, id).is_none()).collect();
        if missing.len() < PARALLEL_FROM {
            for id in missing {
                self.count(arena, encoding, id);
            }
            return;
        }
        let counted: Vec<(u64, u64)> = missing
            .par_iter()
            .with_min_len(64)
            .map(|&id| encoding.count_message_parts(arena.message(id)))
            .collect();
        for (id, c) in missing.into_iter().zip(counted) {
            self.set(encoding, id, c);
        }
    }
}

/// A view's memo: per encoding, the total of its first `counted` visible messages, and the total
/// of the thinking of its first `n` (before the current turn). Appending keeps both valid (they
/// cover a prefix); any other change of the visible list builds a new view (or calls
/// [`ViewTotals::forget`]), which starts empty.
#[derive(Clone, Copy, Default, Debug)]
pub struct ViewTotals {
    totals: [Option<(usize, u64)>; Encoding::ALL.len()],
    thinking: [Option<(usize, u64)>; Encoding::ALL.len()],
}

impl ViewTotals {
    pub fn forget(&mut self) {
        *self = Self::default();
    }

    /// `(counted, total)`: the total of the first `counted` visible messages in `encoding`.
    pub fn get(&self, encoding: Encoding) -> Option<(usize, u64)> {
        self.totals[encoding.index()]
    }

    pub fn set(&mut self, encoding: Encoding, counted: usize, total: u64) {
        self.totals[encoding.index()] = Some((counted, total));
    }

    /// `(n, thinking)`: the tokens of the thinking of the first `n` visible messages.
    pub fn thinking(&self, encoding: Encoding) -> Option<(usize, u64)> {
        self.thinking[encoding.index()]
    }

    pub fn set_thinking(&mut self, encoding: Encoding, n: usize, thinking: u64) {
        self.thinking[encoding.index()] = Some((n, thinking));
    }
}
