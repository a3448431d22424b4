//! Token counts kept beside the store: each stored message's count per encoding, computed when
//! first needed (a stored message never changes, so neither does its count), and each view's
//! running total, so that `token_count()` is O(1) once counted and a budget check never
//! re-tokenizes. Counts are keyed by node id, so they survive snapshots and rollback untouched.

use rayon::prelude::*;

use crate::core::arena::{Arena, NodeId};
use crate::core::store::Store;
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
}

impl Store {
    /// The tokens of the visible messages: each message's count plus the reply priming (none when
    /// nothing is visible). O(1) once counted; O(k) after k appends; the first call counts every
    /// visible message, spread over the cores.
    pub fn token_count(&mut self, encoding: Encoding) -> u64 {
        let len = self.view.visible.len();
        let (counted, mut total) = self.view.token_totals.totals[encoding.index()].unwrap_or((0, 0));
        let counted = counted.min(len);
        if counted < len {
            let ids: Vec<NodeId> = self.view.visible.range(counted..len).collect();
            self.token_counts.fill(&self.arena, encoding, ids.iter().copied());
            total += ids
                .iter()
                .map(|&id| self.token_counts.get(encoding, id).unwrap_or(0))
                .sum::<u64>();
            self.view.token_totals.totals[encoding.index()] = Some((len, total));
        }
        if len == 0 { 0 } else { total + encoding.priming() }
    }

    /// The count of each visible message, in order (priming not included). O(n) once counted.
    pub fn message_token_counts(&mut self, encoding: Encoding) -> Vec<u64> {
        self.token_counts
            .fill(&self.arena, encoding, self.view.visible.iter().copied());
        self.view
            .visible
            .iter()
            .map(|&id| self.token_counts.get(encoding, id).unwrap_or(0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::Cuts;
    use crate::core::store::Incoming;

    fn incoming(contents: &[&str]) -> Incoming {
        let mut incoming = Incoming::default();
        for content in contents {
            let (start, mut e) = incoming.encoder();
            let d = e.open_dict(2);
            e.key("role");
            e.str("user");
            e.key("content");
            e.str(content);
            e.close(d);
            incoming.finish(start, || "m".into()).unwrap();
        }
        incoming
    }

    fn recount(store: &Store, encoding: Encoding) -> u64 {
        encoding.count_messages(store.visible().iter().map(|&id| store.arena().message(id)))
    }

    #[test]
    fn totals_follow_appends_cuts_and_rollback() {
        let e = Encoding::O200kBase;
        let mut store = Store::default();
        assert_eq!(store.token_count(e), 0);
        store.append(&incoming(&["hello world", "a longer message, with punctuation!"]));
        assert_eq!(store.token_count(e), recount(&store, e));
        store.append(&incoming(&["one more"]));
        assert_eq!(store.token_count(e), recount(&store, e));
        let before = store.token_count(e);
        store
            .truncate(
                &Cuts {
                    keep_last: Some(1),
                    ..Cuts::default()
                },
                "t".into(),
            )
            .unwrap();
        assert_eq!(store.token_count(e), recount(&store, e));
        store
            .replace(0, &incoming(&["replaced by a different text"]), "r".into())
            .unwrap();
        assert_eq!(store.token_count(e), recount(&store, e));
        store.rollback(0).unwrap();
        assert_eq!(store.token_count(e), before);
        assert_eq!(
            store.token_count(Encoding::Cl100kBase),
            recount(&store, Encoding::Cl100kBase)
        );
    }

    #[test]
    fn many_messages_are_counted_on_all_cores_once() {
        let texts: Vec<String> = (0..1000).map(|i| format!("message number {i}")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut store = Store::default();
        store.append(&incoming(&refs));
        let e = Encoding::Cl100kBase;
        assert_eq!(store.token_count(e), recount(&store, e));
        let counts = store.message_token_counts(e);
        assert_eq!(counts.len(), 1000);
        assert_eq!(counts.iter().sum::<u64>() + e.priming(), store.token_count(e));
    }
}
