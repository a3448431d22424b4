//! The store's token counts: the visible messages' total per encoding, O(1) once counted (the
//! per-message cache is `core/token_counts.rs`).

use crate::core::arena::NodeId;
use crate::core::store::Store;
use crate::core::tokens::Encoding;

impl Store {
    /// The tokens of the visible messages: each message's count plus the reply priming (none when
    /// nothing is visible). O(1) once counted; O(k) after k appends; the first call counts every
    /// visible message, spread over the cores.
    pub fn token_count(&mut self, encoding: Encoding) -> u64 {
        let len = self.view.visible.len();
        let (counted, mut total) = self.view.token_totals.get(encoding).unwrap_or((0, 0));
        let counted = counted.min(len);
        if counted < len {
            let ids: Vec<NodeId> = self.view.visible.range(counted..len).collect();
            self.token_counts.fill(&self.arena, encoding, ids.iter().copied());
            total += ids
                .iter()
                .map(|&id| self.token_counts.get(encoding, id).unwrap_or(0))
                .sum::<u64>();
            self.view.token_totals.set(encoding, len, total);
        }
        if len == 0 { 0 } else { total + encoding.priming() }
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
        let each: u64 = store
            .visible()
            .iter()
            .map(|&id| e.count_message(store.arena().message(id)))
            .sum();
        assert_eq!(each + e.priming(), store.token_count(e));
        assert!(
            store
                .visible()
                .iter()
                .all(|&id| store.token_counts.get(e, id).is_some()),
            "every message is counted once and cached"
        );
    }
}
