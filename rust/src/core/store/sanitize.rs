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
        self.findings(&index.facts(visible.iter().copied(), visible.len()))
    }

    /// The pair scan of `facts` (those of the visible messages, in order), with each finding's role.
    fn findings(&self, facts: &pairs::Facts<'_>) -> Vec<(Finding, Role)> {
        let visible = self.visible();
        pairs::scan(facts)
            .iter()
            .map(|r| (Finding::new(r), self.arena().role(visible[r.index])))
            .collect()
    }

    /// [`Store::pair_findings`] reading the pair facts straight from the visible messages, not
    /// through the pair index: for a store scanned once (a batch record), where building the
    /// index (a copy of every id) costs more than it could save. The same scan and findings.
    fn pair_findings_once(&self) -> Vec<(Finding, Role)> {
        let visible = self.visible();
        let mut facts = pairs::Facts::with_capacity(visible.len());
        for &id in visible.iter() {
            let kind = pairs::stored_kind(self.arena().role(id), self.arena().message(id), &mut |text| {
                facts.push_id(text);
            });
            facts.finish(kind);
        }
        self.findings(&facts)
    }

    /// Remove what the pair scan finds, as a new batch; when it finds nothing, no batch opens.
    /// Returns the findings (positions before the removal). O(n).
    pub fn sanitize(&mut self, description: String) -> Vec<(Finding, Role)> {
        let findings = self.pair_findings();
        self.remove_findings(&findings, description);
        findings
    }

    /// [`Store::sanitize`] for a store that is scanned once, such as a batch record's: the same
    /// findings and batch, without building the pair index later scans would read.
    pub fn sanitize_once(&mut self, description: String) -> Vec<(Finding, Role)> {
        let findings = self.pair_findings_once();
        self.remove_findings(&findings, description);
        findings
    }

    fn remove_findings(&mut self, findings: &[(Finding, Role)], description: String) {
        if !findings.is_empty() {
            let positions: Vec<usize> = findings.iter().map(|(f, _)| f.index).collect();
            self.remove_positions(&positions, description);
        }
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
        self.view = View::of(visible);
    }
}

#[cfg(test)]
mod tests {
    use crate::core::batch::parse::scan;
    use crate::core::store::Store;

    /// Stores of chat, Anthropic and Responses messages with every kind of broken pairing.
    const CONVERSATIONS: [&str; 5] = [
        r#"[{"role":"user","content":"q"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"a","content":"r"},
            {"role":"tool","tool_call_id":"z","content":"orphan"},
            {"role":"user","content":"next"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c","content":"ok"},
            {"role":"tool","tool_call_id":"c","content":"again"},
            {"role":"tool","tool_call_id":"","content":"no id"}]"#,
        r#"[{"role":"user","content":"q"},
            {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]},
            {"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"f","input":{}}]},
            {"role":"user","content":[{"type":"text","text":"late"},{"type":"tool_result","tool_use_id":"t2","content":"r"}]}]"#,
        r#"[{"type":"message","role":"user","content":"q"},
            {"type":"reasoning","summary":[]},
            {"type":"function_call","call_id":"x","name":"f","arguments":"{}"},
            {"type":"function_call_output","call_id":"x","output":"r"},
            {"type":"function_call_output","call_id":"x","output":"dup"},
            {"type":"function_call","call_id":"y","name":"f","arguments":"{}"},
            {"type":"function_call_output","call_id":"w","output":"orphan"}]"#,
        r#"[{"role":"system","content":"s"},{"role":"user","content":"only text"}]"#,
        "[]",
    ];

    #[test]
    fn sanitize_once_finds_and_removes_what_sanitize_does() {
        let mut found = Vec::new();
        for text in CONVERSATIONS {
            let store = || Store::of(scan(text).map_err(|_| text).unwrap().incoming);
            let (mut indexed, mut once) = (store(), store());
            let (expected, got) = (indexed.sanitize("s".into()), once.sanitize_once("s".into()));
            assert_eq!(format!("{got:?}"), format!("{expected:?}"), "{text}");
            assert_eq!(once.visible().to_vec(), indexed.visible().to_vec(), "{text}");
            assert_eq!(once.batch_index(), indexed.batch_index(), "{text}");
            found.push(got.len());
        }
        // The broken ones do have findings: the comparison is not of empty lists.
        assert!(found[..3].iter().all(|&n| n >= 2), "{found:?}");
    }
}
