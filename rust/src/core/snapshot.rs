//! The visible state (a [`View`]) and the batch history of copy-on-write snapshots.
//!
//! A view is the ordered list of visible node ids plus its role index, both copy-on-write vectors
//! ([`CowVec`]): cloning one is O(1) and copies no message, and after a clone only the chunks that
//! change are copied. A snapshot is such a clone, so memory grows with what changed, not with the history.
//! The role index is built when a role is first asked for: a view that no one asks (most views of
//! a batch's conversations, each gone after a few steps) never pays for it.

use std::sync::OnceLock;

use crate::core::arena::{Arena, NodeId};
use crate::core::cow_vec::CowVec;
use crate::core::roles::{Role, RoleIndex};
use crate::core::token_counts::ViewTotals;

#[derive(Clone, Default, Debug)]
pub struct View {
    pub visible: CowVec<NodeId>,
    /// The positions of each role in `visible`, once asked for ([`View::roles`]); kept in step
    /// with `visible` from then on by [`View::push`] and [`View::move_role`].
    roles: OnceLock<RoleIndex>,
    /// Token totals of this view; code that changes `visible` other than by `push` or `of` must
    /// call `token_totals.forget()`.
    pub token_totals: ViewTotals,
}

impl View {
    /// A view of `ids` in this order. O(1); its role index is built when first asked for.
    pub fn of(ids: CowVec<NodeId>) -> Self {
        Self {
            visible: ids,
            roles: OnceLock::new(),
            token_totals: ViewTotals::default(),
        }
    }

    /// The role index of the visible messages (`arena` holds them), built now if it was not.
    /// O(1), or O(n) the first time.
    pub fn roles(&self, arena: &Arena) -> &RoleIndex {
        self.roles
            .get_or_init(|| RoleIndex::from_roles(self.visible.iter().map(|&id| arena.role(id))))
    }

    pub fn len(&self) -> usize {
        self.visible.len()
    }

    pub fn is_empty(&self) -> bool {
        self.visible.is_empty()
    }

    pub fn push(&mut self, id: NodeId, arena: &Arena) {
        let pos = self.visible.len() as u32;
        self.visible.push_back(id);
        if let Some(roles) = self.roles.get_mut() {
            roles.push(arena.role(id), pos);
        }
    }

    /// The message at `pos` changed role from `old` to `new` (its id is already replaced).
    pub fn move_role(&mut self, pos: u32, old: Role, new: Role) {
        if let Some(roles) = self.roles.get_mut() {
            roles.move_position(pos, old, new);
        }
    }
}

/// The state at the end of a batch.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub view: View,
    /// When the batch ended (seconds since the epoch).
    pub timestamp: f64,
    /// What ended it (the operation that opened the next batch, or a checkpoint's description).
    pub description: String,
}

/// Ended batches, by batch index; the current batch is `ended.len()`.
#[derive(Clone, Default, Debug)]
pub struct History {
    pub ended: Vec<Snapshot>,
}

impl History {
    pub fn current_index(&self) -> usize {
        self.ended.len()
    }

    /// End the current batch with `view` as its final state. O(1).
    pub fn end_batch(&mut self, view: View, timestamp: f64, description: String) {
        self.ended.push(Snapshot {
            view,
            timestamp,
            description,
        });
    }

    /// Make batch `b` (< current) current again: its final view, later batches discarded.
    pub fn reopen(&mut self, b: usize) -> View {
        let view = self.ended[b].view.clone();
        self.ended.truncate(b);
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::value::Encoder;

    fn arena(n: usize) -> Arena {
        let mut arena = Arena::default();
        for i in 0..n {
            let mut buf = Vec::new();
            Encoder::new(&mut buf).str("m");
            arena.push(&buf, if i % 2 == 0 { Role::User } else { Role::Assistant }, 0.0);
        }
        arena
    }

    #[test]
    fn snapshots_are_unaffected_by_later_changes() {
        let arena = arena(100);
        let mut view = View::default();
        for id in 0..50 {
            view.push(id, &arena);
        }
        let mut history = History::default();
        history.end_batch(view.clone(), 1.0, "checkpoint".into());
        for id in 50..100 {
            view.push(id, &arena);
        }
        view.visible.set(0, 99);
        assert_eq!(history.ended[0].view.len(), 50);
        assert_eq!(history.ended[0].view.visible[0], 0);
        assert_eq!(history.ended[0].view.roles(&arena).of(Role::User).len(), 25);
        history.end_batch(view, 2.0, "second".into());
        let back = history.reopen(0);
        assert_eq!(back.len(), 50);
        assert_eq!(history.current_index(), 0);
    }

    #[test]
    fn a_view_rebuilds_its_role_index() {
        let arena = arena(10);
        let mut view = View::of((0..10).rev().collect());
        assert_eq!(
            view.roles(&arena).of(Role::User).iter().copied().collect::<Vec<_>>(),
            [1, 3, 5, 7, 9]
        );
        // Built, it follows pushes; a view that pushes before its index is built agrees.
        let mut unasked = view.clone();
        unasked.roles = OnceLock::new();
        for v in [&mut view, &mut unasked] {
            v.push(0, &arena);
        }
        assert_eq!(
            view.roles(&arena).of(Role::User).iter().copied().collect::<Vec<_>>(),
            [1, 3, 5, 7, 9, 10]
        );
        assert_eq!(
            unasked.roles(&arena).of(Role::User).iter().copied().collect::<Vec<_>>(),
            [1, 3, 5, 7, 9, 10]
        );
    }
}
