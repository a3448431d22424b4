//! Token counts kept beside the store: each stored message's count per encoding, computed when
//! first needed (a stored message never changes, so neither does its count), and each view's
//! running total, so that `token_count()` is O(1) once counted and a budget check never
//! re-tokenizes. Counts are keyed by node id, so they survive snapshots and rollback untouched.

use rayon::prelude::*;

use crate::core::arena::{Arena, NodeId};
use crate::core::tokens::Encoding;

/// Not counted yet.
const UNKNOWN: u32 = u32::MAX;
/// Below this many messages to count, one core does it (threads cost more than they save).
const PARALLEL_FROM: usize = 256;

/// Per encoding, the count of each stored message by node id (`UNKNOWN` until counted).
#[derive(Clone, Default, Debug)]
pub struct TokenCounts {
    counts: [Vec<u32>; Encoding::ALL.len()],
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
        let c = encoding.count_message(arena.message(id));
        self.set(encoding, id, c);
        c
    }

    fn set(&mut self, encoding: Encoding, id: NodeId, count: u64) {
        let table = &mut self.counts[encoding.index()];
        if table.len() <= id as usize {
            table.resize(id as usize + 1, UNKNOWN);
        }
        // A message of 4 billion tokens cannot be stored (spans are u32 bytes), so this never saturates.
        table[id as usize] = u32::try_from(count).unwrap_or(UNKNOWN - 1);
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
        let counted: Vec<u64> = missing
            .par_iter()
            .with_min_len(64)
            .map(|&id| encoding.count_message(arena.message(id)))
            .collect();
        for (id, c) in missing.into_iter().zip(counted) {
            self.set(encoding, id, c);
        }
    }
}

/// A view's memo: per encoding, the total of its first `counted` visible messages. Appending
/// keeps it valid (it covers a prefix); any other change of the visible list builds a new view
/// (or calls [`ViewTotals::forget`]), which starts empty.
#[derive(Clone, Copy, Default, Debug)]
pub struct ViewTotals {
    totals: [Option<(usize, u64)>; Encoding::ALL.len()],
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
}
