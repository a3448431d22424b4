//! What the pair scan finds, owned so it can leave the store's lock (the scan and the sanitize
//! batch on a store are `core/store/sanitize.rs`).

use crate::core::pairs::Removal;

/// A removal that owns its ids, so it can leave the store's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The position in the visible list.
    pub index: usize,
    /// [`crate::core::pairs::Reason::code`].
    pub code: &'static str,
    /// [`crate::core::pairs::Reason::ids`].
    pub ids: Vec<String>,
    /// [`crate::core::pairs::Reason::other`].
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

#[cfg(test)]
mod tests {
    use crate::core::roles::Role;
    use crate::core::store::{Incoming, Store};

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
