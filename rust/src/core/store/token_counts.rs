//! The store's token counts: the visible messages' total per encoding, O(1) once counted (the
//! per-message cache is `core/token_counts.rs`).

use crate::core::arena::NodeId;
use crate::core::config::Role;
use crate::core::store::Store;
use crate::core::tokens::Encoding;
use crate::core::turns::{Thinking, opens_turn};

impl Store {
    /// [`Store::token_count_with`] by the providers' default rule ([`Thinking::DropEarlier`]).
    pub fn token_count(&mut self, encoding: Encoding) -> u64 {
        self.token_count_with(encoding, Thinking::default())
    }

    /// The tokens of the visible messages sent in one request: each message's count plus the
    /// reply priming (none when nothing is visible), less the thinking of earlier turns with
    /// [`Thinking::DropEarlier`]. O(1) once counted (plus a walk back over the current turn when
    /// some message has thinking); O(k) after k appends; the first call counts every visible
    /// message, spread over the cores.
    pub fn token_count_with(&mut self, encoding: Encoding, thinking: Thinking) -> u64 {
        let total = self.token_count_of_all(encoding);
        if thinking == Thinking::Count || !self.token_counts.any_thinking(encoding) {
            return total;
        }
        total - self.earlier_thinking(encoding)
    }

    /// The position of the last of the first `end` visible messages that opens a user turn (0
    /// when none does): the thinking before it is earlier turns'. O(the current turn).
    pub fn turn_start(&self, end: usize) -> usize {
        let visible = &self.view.visible;
        (0..end.min(visible.len()))
            .rev()
            .find(|&pos| {
                let id = visible[pos];
                self.arena.role(id) == Role::User && opens_turn(self.arena.message(id))
            })
            .unwrap_or(0)
    }

    /// The tokens of the thinking of the visible messages before the current turn, every visible
    /// message counted. Memoised per view: O(k) after k appends.
    fn earlier_thinking(&mut self, encoding: Encoding) -> u64 {
        let turn = self.turn_start(self.view.visible.len());
        let (from, mut sum) = match self.view.token_totals.thinking(encoding) {
            Some((n, sum)) if n <= turn => (n, sum),
            _ => (0, 0),
        };
        sum += self
            .view
            .visible
            .range(from..turn)
            .map(|id| self.token_counts.thinking(encoding, id))
            .sum::<u64>();
        self.view.token_totals.set_thinking(encoding, turn, sum);
        sum
    }

    /// The tokens of the visible messages, every thinking block counted.
    fn token_count_of_all(&mut self, encoding: Encoding) -> u64 {
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
    use crate::core::store::{Incoming, json_incoming_of};

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

    fn sent(store: &Store, encoding: Encoding, thinking: Thinking) -> u64 {
        let messages: Vec<_> = store.visible().iter().map(|&id| store.arena().message(id)).collect();
        let counts = encoding.count_message_list(&messages, thinking);
        counts.iter().sum::<u64>() + if counts.is_empty() { 0 } else { encoding.priming() }
    }

    #[test]
    fn the_total_leaves_out_earlier_turns_thinking_through_appends_and_rollback() {
        let e = Encoding::O200kBase;
        let think = |text: &str| serde_json::json!({"role": "assistant", "content": [{"type": "thinking", "thinking": text}, {"type": "text", "text": "ok"}]});
        let mut store = Store::default();
        store.append(&json_incoming_of(&[
            serde_json::json!({"role": "user", "content": "plan a trip"}),
            think(&"Paris or Rome? ".repeat(20)),
        ]));
        let one_turn = store.token_count(e);
        assert_eq!(
            one_turn,
            store.token_count_with(e, Thinking::Count),
            "one turn: all of it counts"
        );
        let before = store.checkpoint("c".into());
        store.append(&json_incoming_of(&[
            serde_json::json!({"role": "user", "content": "and then?"}),
            think("Rome."),
        ]));
        for thinking in [Thinking::DropEarlier, Thinking::Count] {
            assert_eq!(store.token_count_with(e, thinking), sent(&store, e, thinking));
        }
        assert!(store.token_count(e) < store.token_count_with(e, Thinking::Count));
        store.append(&json_incoming_of(&[
            serde_json::json!({"role": "user", "content": "thanks"}),
        ]));
        assert_eq!(
            store.token_count(e),
            sent(&store, e, Thinking::DropEarlier),
            "the memo extends"
        );
        store.rollback(before).unwrap();
        assert_eq!(store.token_count(e), one_turn);
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
