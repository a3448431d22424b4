//! CLEAR TOOL USES and CLEAR THINKING on the store: plan with `core/edits.rs`, the counts taken
//! from the store's cache, and apply the plan as one new batch (none when nothing is cleared).

use crate::core::arena::NodeId;
use crate::core::cow_vec::CowVec;
use crate::core::edits::{Change, ClearThinking, ClearToolUses, Plan, Visible, plan_thinking, plan_tool_uses};
use crate::core::snapshot::View;
use crate::core::store::Store;
use crate::core::tokens::Encoding;
use crate::core::turns::Thinking;

/// What the last CLEAR TOOL USES settled, so that the next one with the same settings reads only
/// the messages after it: an agent's edit after each call costs O(new messages), not O(history).
#[derive(Debug, Clone, Default)]
pub struct EditMemo {
    /// The edit's settings but its trigger (which decides when, not what).
    settings: String,
    /// The visible list after that edit, and the position before which it settled everything.
    view: CowVec<NodeId>,
    settled: usize,
}

impl EditMemo {
    /// Where a CLEAR TOOL USES with `settings` on `visible` may start reading: the settled
    /// position when the messages before it are the ones the memo settled, else 0. O(settled).
    fn start(&self, settings: &str, visible: &CowVec<NodeId>) -> usize {
        let s = self.settled;
        let same = self.settings == settings && s <= visible.len() && self.view.range(0..s).eq(visible.range(0..s));
        if same { s } else { 0 }
    }
}

fn settings_of(edit: &ClearToolUses) -> String {
    format!(
        "{:?}",
        ClearToolUses {
            trigger: None,
            ..edit.clone()
        }
    )
}

impl Store {
    /// CLEAR TOOL USES: when the visible messages cost more than `edit.trigger` tokens (always,
    /// without one), replace the oldest tool results (all but the last `keep` tool uses) with the
    /// placeholder, in a new batch. O(n) with cached counts, plus the text of what changes.
    pub fn clear_tool_uses(&mut self, edit: &ClearToolUses, description: String) -> Plan {
        if let Some(trigger) = edit.trigger
            && self.token_count_with(edit.encoding, edit.thinking) <= trigger
        {
            return Plan::default();
        }
        let settings = settings_of(edit);
        let start = self.edit_memo.start(&settings, &self.view.visible);
        let plan = {
            let visible = Visible::of(&self.arena, &self.view.visible, start);
            let mut old_cost = self.cached_cost(&visible, edit.encoding, edit.thinking);
            plan_tool_uses(&visible, edit, &mut old_cost)
        };
        self.apply_edit(&plan, description);
        self.edit_memo = EditMemo {
            settings,
            view: self.view.visible.clone(),
            settled: plan.settled,
        };
        plan
    }

    /// CLEAR THINKING: clear the thinking of every turn but the last `keep_turns` that have some,
    /// in a new batch. O(n) with cached counts, plus the text of what changes.
    pub fn clear_thinking(&mut self, edit: &ClearThinking, description: String) -> Plan {
        let plan = {
            let visible = Visible::of(&self.arena, &self.view.visible, 0);
            let mut old_cost = self.cached_cost(&visible, edit.encoding, edit.thinking);
            plan_thinking(&visible, edit, &mut old_cost)
        };
        self.apply_edit(&plan, description);
        plan
    }

    /// What the visible message at a position costs now, from the count cache.
    fn cached_cost<'a>(
        &'a self,
        visible: &'a Visible<'_>,
        encoding: Encoding,
        thinking: Thinking,
    ) -> impl FnMut(usize) -> u64 + 'a {
        let ids = &self.view.visible;
        move |pos| {
            let id = ids[pos];
            let (full, thought) = match self.token_counts.get(encoding, id) {
                Some(full) => (full, self.token_counts.thinking(encoding, id)),
                None => encoding.count_message_parts(self.arena.message(id)),
            };
            if pos < visible.turn && thinking == Thinking::DropEarlier {
                full - thought
            } else {
                full
            }
        }
    }

    /// Store each replacement (with its original's role and time) and change the visible list,
    /// as one new batch. Nothing happens for an empty plan.
    fn apply_edit(&mut self, plan: &Plan, description: String) {
        if plan.changes.is_empty() {
            return;
        }
        self.open_batch(description);
        let mut hidden = false;
        for change in &plan.changes {
            match change {
                Change::Replace(pos, bytes) => {
                    let old = self.view.visible[*pos];
                    let (role, time) = (self.arena.role(old), self.arena.timestamp(old));
                    let id: NodeId = self.arena.push(bytes, role, time);
                    self.view.visible.set(*pos, id);
                }
                Change::Hide(_) => hidden = true,
            }
        }
        self.view.token_totals.forget();
        if hidden {
            let gone: Vec<usize> = plan
                .changes
                .iter()
                .filter_map(|c| match c {
                    Change::Hide(pos) => Some(*pos),
                    Change::Replace(..) => None,
                })
                .collect();
            let kept: Vec<NodeId> = (0..self.view.visible.len())
                .filter(|p| gone.binary_search(p).is_err())
                .map(|p| self.view.visible[p])
                .collect();
            self.view = View::of(CowVec::from_vec(kept));
        }
    }
}
