//! The pair scan on a [`Store`]'s visible messages, read straight from their stored encoding (no
//! conversion, no GIL), and the sanitize batch that removes what it finds.

use crate::core::pairs::{self, Removal};
use crate::core::roles::Role;
use crate::core::snapshot::View;
use crate::core::store::Store;

/// A removal that owns its ids, so it can leave the store's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The position in the visible list.
    pub index: usize,
    /// [`pairs::Reason::code`].
    pub code: &'static str,
    /// [`pairs::Reason::ids`].
    pub ids: Vec<String>,
    /// [`pairs::Reason::other`].
    pub other: Option<usize>,
}

impl Finding {
    pub fn new(removal: &Removal<'_>) -> Self {
        Self {
            index: removal.index,
            code: removal.reason.code(),
            ids: removal.reason.ids().into_iter().map(str::to_owned).collect(),
            other: removal.reason.other(),
        }
    }
}

impl Store {
    /// What the sanitizer would remove from the visible messages, in order, with their roles.
    /// O(n) over the pair index (plus reading the messages stored since the last scan).
    pub fn pair_findings(&self) -> Vec<(Finding, Role)> {
        let visible = self.visible();
        let index = self.pairs.indexed(self.arena());
        pairs::scan(&index.facts(visible.iter().copied(), visible.len()))
            .iter()
            .map(|r| (Finding::new(r), self.arena().role(visible[r.index])))
            .collect()
    }

    /// Remove what the pair scan finds, as a new batch; when it finds nothing, no batch opens.
    /// Returns the findings (positions before the removal). O(n).
    pub fn sanitize(&mut self, description: String) -> Vec<(Finding, Role)> {
        let findings = self.pair_findings();
        if !findings.is_empty() {
            let positions: Vec<usize> = findings.iter().map(|(f, _)| f.index).collect();
            self.remove_positions(&positions, description);
        }
        findings
    }

    /// Hide the visible messages at `positions` (ascending, distinct) as a new batch. O(n).
    pub fn remove_positions(&mut self, positions: &[usize], description: String) {
        let mut skip = positions.iter().copied().peekable();
        let visible = self
            .visible()
            .iter()
            .enumerate()
            .filter_map(|(p, &id)| {
                if skip.peek() == Some(&p) {
                    skip.next();
                    None
                } else {
                    Some(id)
                }
            })
            .collect();
        self.open_batch(description);
        self.view = View::of(visible, &self.arena);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::store::Incoming;

    /// `("assistant", ["x"])` calls x; `("tool", ["x"])` answers x; other roles plain text.
    fn store_of(messages: &[(&str, &[&str])]) -> Store {
        let mut incoming = Incoming::default();
        for (role, ids) in messages {
            let (start, mut e) = incoming.encoder();
            let calls = *role == "assistant" && !ids.is_empty();
            let d = e.open_dict(if *role == "tool" || calls { 3 } else { 2 });
            e.key("role");
            e.str(role);
            e.key("content");
            if calls {
                e.null();
                e.key("tool_calls");
                let l = e.open_list(ids.len());
                for id in *ids {
                    e.tool_call(id);
                }
                e.close(l);
            } else {
                e.str("text");
            }
            if *role == "tool" {
                e.key("tool_call_id");
                e.str(ids[0]);
            }
            e.close(d);
            incoming.finish(start, || "m".into()).unwrap();
        }
        let mut store = Store::default();
        store.append(&incoming);
        store
    }

    #[test]
    fn findings_name_positions_roles_and_ids() {
        let store = store_of(&[
            ("user", &[]),
            ("assistant", &["a", "b"]),
            ("tool", &["a"]),
            ("user", &[]),
            ("tool", &["z"]),
        ]);
        let found = store.pair_findings();
        let summary: Vec<_> = found.iter().map(|(f, role)| (f.index, *role, f.code)).collect();
        assert_eq!(
            summary,
            [
                (1, Role::Assistant, "unanswered"),
                (2, Role::Tool, "incomplete"),
                (4, Role::Tool, "orphan")
            ]
        );
        assert_eq!(found[0].0.ids, ["b"]);
        assert_eq!(found[1].0.other, Some(1));
    }

    #[test]
    fn sanitize_opens_a_batch_only_when_it_removes_something() {
        let mut store = store_of(&[("user", &[]), ("assistant", &["a"]), ("tool", &["a"])]);
        assert!(store.sanitize("s".into()).is_empty());
        assert_eq!(store.batch_index(), 0);
        let mut store = store_of(&[("user", &[]), ("assistant", &["a"]), ("user", &[]), ("tool", &["a"])]);
        assert_eq!(store.sanitize("s".into()).len(), 2);
        assert_eq!(store.batch_index(), 1);
        assert_eq!(store.len(), 2);
        assert_eq!(store.count(Some(Role::User)), 2);
        assert!(store.pair_findings().is_empty());
        store.rollback(0).unwrap();
        assert_eq!(store.len(), 4);
    }
}
