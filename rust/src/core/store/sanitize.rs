//! The pair scan on the store's visible messages, read straight from their stored encoding (no
//! conversion, no GIL), and the sanitize batch that removes what it finds.

use crate::core::pairs;
use crate::core::roles::Role;
use crate::core::sanitize::Finding;
use crate::core::snapshot::View;
use crate::core::store::Store;

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
