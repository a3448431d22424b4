//! TRIM TO TOKENS on the store: plan ([`plan`]), cut ([`partial`]) and apply, the counts taken
//! from the store's cache (`core/trim.rs` holds the plan; this is its use on a [`Store`]).

use std::cell::RefCell;

use crate::core::arena::NodeId;
use crate::core::config::{Budget, Strategy};
use crate::core::cow_vec::CowVec;
use crate::core::snapshot::View;
use crate::core::store::Store;
use crate::core::trim::{Selection, Slot, exact_cut, finish, kept_end, plan};
use crate::core::turns::Thinking;

/// Counts are computed this many at a time when a trim reaches uncounted messages (doubling up
/// to `PREFETCH_MAX`), on all cores: a cold history is counted about as fast as `token_count`,
/// and only as far back as the trim looks.
const PREFETCH_FIRST: usize = 64;
const PREFETCH_MAX: usize = 1 << 14;

impl Store {
    /// TRIM with the cached counts of `encoding`: plan, cut (if asked) and apply under one lock.
    /// The messages before [`Store::earlier_turns_end`] cost their count less their thinking. A
    /// new batch. O(k) for k messages looked at, once counted.
    pub fn trim_to_tokens(&mut self, budget: &Budget, description: String) {
        let (visible, selection) = self.plan_trim(budget);
        let cut = exact_cut(&self.arena, &visible, &selection, budget);
        self.apply_trim(&visible, &selection, cut, budget, description);
    }

    /// Where the messages whose thinking a trim of `visible` does not count end. With
    /// [`Thinking::DropEarlier`] and the newest messages kept, it is the kept history's current
    /// turn ([`Store::turn_start`]: the kept tail holds that turn's opening message, or none at
    /// all, so it is the same turn), as `token_count` counts the result; keeping the first
    /// messages, thinking is counted in full (the kept head's last turn is not known before it is
    /// chosen), which can only under-fill the budget. The one rule of every trim path.
    pub fn earlier_turns_end(&self, visible: &CowVec<NodeId>, budget: &Budget) -> usize {
        match (budget.thinking, budget.strategy) {
            (Thinking::DropEarlier, Strategy::Last) => self.turn_start(kept_end(visible, &self.arena, budget)),
            _ => 0,
        }
    }

    /// The plan of [`Store::trim_to_tokens`] over the visible list (returned with it), for a
    /// caller that cuts the candidate itself, then applies the plan ([`Store::apply_trim`]).
    pub fn plan_trim(&mut self, budget: &Budget) -> (CowVec<NodeId>, Selection) {
        let encoding = budget.encoding;
        let visible = self.view.visible.clone();
        let len = visible.len();
        let turn = self.earlier_turns_end(&visible, budget);
        let (arena, counts) = (&self.arena, &mut self.token_counts);
        let mut window = PREFETCH_FIRST;
        let selection = plan(
            &visible,
            arena,
            budget,
            encoding.priming(),
            &mut |pos| {
                let id = visible[pos];
                let full = counts.get(encoding, id).unwrap_or_else(|| {
                    let ahead = match budget.strategy {
                        Strategy::Last => (pos + 1).saturating_sub(window)..pos + 1,
                        Strategy::First => pos..(pos + window).min(len),
                    };
                    counts.fill(arena, encoding, visible.range(ahead));
                    window = (window * 2).min(PREFETCH_MAX);
                    counts.count(arena, encoding, id)
                });
                if pos < turn {
                    full - counts.thinking(encoding, id)
                } else {
                    full
                }
            },
            &mut |_| 0,
        );
        (visible, selection)
    }

    /// TRIM counting each message only when the plan looks at it (the kept messages, and of the
    /// dropped end what the lower bounds of `Encoding::count_message_at_least` do not settle),
    /// never ahead: for a store that lives for one trim, such as a conversation of a batch, where
    /// text counted ahead would be tokenized for nothing. The thinking rule is
    /// [`Store::trim_to_tokens`]'s. A new batch. O(k).
    pub fn trim_to_tokens_lazily(&mut self, budget: &Budget, description: String) {
        let encoding = budget.encoding;
        let visible = self.view.visible.clone();
        let turn = self.earlier_turns_end(&visible, budget);
        let (arena, counts) = (&self.arena, RefCell::new(&mut self.token_counts));
        let selection = plan(
            &visible,
            arena,
            budget,
            encoding.priming(),
            &mut |pos| {
                let id = visible[pos];
                let mut counts = counts.borrow_mut();
                let full = counts.count(arena, encoding, id);
                if pos < turn {
                    full - counts.thinking(encoding, id)
                } else {
                    full
                }
            },
            &mut |pos| {
                let id = visible[pos];
                let counts = counts.borrow();
                match counts.get(encoding, id) {
                    Some(full) if pos < turn => full - counts.thinking(encoding, id),
                    Some(full) => full,
                    None => encoding.count_message_at_least(arena.message(id), pos < turn),
                }
            },
        );
        let cut = exact_cut(&self.arena, &visible, &selection, budget);
        self.apply_trim(&visible, &selection, cut, budget, description);
    }

    /// Apply a trim planned on `planned` (which must still be the visible list; otherwise nothing
    /// changes and `false` comes back): a new batch holding the kept messages, the cut message
    /// stored as a new message in place of its original. O(k).
    pub fn apply_trim(
        &mut self,
        planned: &CowVec<NodeId>,
        selection: &Selection,
        cut: Option<Vec<u8>>,
        budget: &Budget,
        description: String,
    ) -> bool {
        // Equal ids mean an equal plan (stored messages never change): an unchanged list shares
        // its chunks (O(1)); a list rebuilt with the same ids is compared item by item.
        if !self.view.visible.ptr_eq(planned) && self.view.visible != *planned {
            return false;
        }
        let slots = finish(selection, cut.is_some(), planned, &self.arena, budget);
        let mut kept: Vec<NodeId> = Vec::new();
        for slot in slots {
            match slot {
                Slot::Keep(range) => kept.extend(planned.range(range)),
                Slot::Cut => {
                    if let (Some(bytes), Some((pos, _))) = (&cut, selection.candidate) {
                        let original = planned[pos];
                        let id = self
                            .arena
                            .push(bytes, self.arena.role(original), self.arena.timestamp(original));
                        kept.push(id);
                    }
                }
            }
        }
        self.open_batch(description);
        self.view = View::of(CowVec::from_slice(&kept));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::Encoding;
    use crate::core::store::incoming_of;

    fn store(messages: &[(&str, &str)]) -> Store {
        let mut store = Store::default();
        store.append(&incoming_of(messages));
        store
    }

    #[test]
    fn a_lazy_trim_does_not_count_a_turn_its_bounds_show_cannot_fit() {
        let long = "word ".repeat(2_000);
        let history = [
            ("user", "the old question"),
            ("assistant", long.as_str()),
            ("user", "the new question"),
            ("assistant", "a short answer"),
        ];
        let budget = Budget::defaults(100, Encoding::O200kBase);
        let mut lazy = store(&history);
        lazy.trim_to_tokens_lazily(&budget, "t".into());
        let mut eager = store(&history);
        eager.trim_to_tokens(&budget, "t".into());
        assert_eq!(lazy.visible(), eager.visible());
        assert_eq!(lazy.len(), 2, "the new turn is kept");
        // The old turn's 2,000 words pass the room on their bounds: neither message is counted.
        assert!((0..2).all(|id| lazy.token_counts.get(Encoding::O200kBase, id).is_none()));
        assert!((2..4).all(|id| lazy.token_counts.get(Encoding::O200kBase, id).is_some()));
    }
}
