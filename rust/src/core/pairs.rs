//! The tool-pair scan: which messages of a history the model APIs would refuse, and why.
//!
//! The scan reads only a few *facts* per message (see [`Kind`]): the call ids an assistant message
//! makes (`tool_calls[*].id`, or the `id` of its `tool_use` blocks), the id a `tool` message answers
//! (`tool_call_id`), and the ids the `tool_result` blocks of a user message answer (`tool_use_id`).
//! The rules are the APIs' own (docs/sanitizer.md):
//!
//! - the calls of an assistant message are answered by its *results*: the run of tool messages
//!   right after it, or, when there is none, the user message right after it if that one holds
//!   `tool_result` blocks (Anthropic);
//! - a group whose calls are not all answered, one with a call that has no id, or one that makes
//!   two calls with the same id goes as a whole: the assistant message and the results that answer
//!   it;
//! - a result with no id, one that answers no call of the message right before its run (an
//!   orphan), and a second result for the same call (a duplicate) go;
//! - a user message's `tool_result` blocks are all or nothing: one bad block removes the message,
//!   and with it the group it answers (a message is never edited, so the output is always a
//!   subsequence of the input).
//!
//! Ids pair by position only: an id reused later in the history is a new call.
//!
//! Responses API items pair by `call_id` as that API pairs them: each call item (`function_call`,
//! ...) needs an output item with its `call_id` somewhere after it ("No tool output found for
//! function call"), each output a call before it ("No tool call found for function call output");
//! an unanswered call goes alone, and the `reasoning` items right before a run of calls go with it
//! when every call of the run goes. An output answers the latest call with its id before it.

use crate::core::message::{is_call_type, is_output_type};
use crate::core::roles::Role;
use crate::core::value::{Items, ValueRef};

/// What a message is to the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing to pair: a system, user or assistant message without calls or results.
    Other,
    /// An assistant message that calls tools; its ids are the call ids, in order.
    Calls,
    /// A `tool` message; its one id is its `tool_call_id`.
    ToolResult,
    /// A user message holding `tool_result` blocks; its ids are their `tool_use_id`s, in order.
    BlockResults,
    /// The same, but some `tool_result` block comes after another block: Anthropic refuses it
    /// ("messages following `tool_use` blocks must begin with" their results).
    LateBlockResults,
    /// A Responses API call item (`function_call`, ...); its one id is its `call_id`.
    ItemCall,
    /// A Responses API output item (`function_call_output`, ...); its one id is its `call_id`.
    ItemOutput,
    /// A Responses API `reasoning` item: it goes with the calls right after it.
    Reasoning,
}

/// The facts of a history, message by message. An id is `None` when it is missing, not a string
/// or empty: such a call or result can never be paired.
#[derive(Debug, Default, Clone)]
pub struct Facts<'a> {
    /// Per message: its kind and the end of its ids in `ids` (the start is the previous end).
    messages: Vec<(Kind, u32)>,
    ids: Vec<Option<&'a str>>,
}

impl<'a> Facts<'a> {
    pub fn with_capacity(messages: usize) -> Self {
        Self {
            messages: Vec::with_capacity(messages),
            ids: Vec::with_capacity(messages),
        }
    }

    /// Add the next message: its ids were pushed with [`Facts::push_id`] since the last call.
    /// An assistant message with calls or a user message with block results but no ids is `Other`.
    pub fn finish(&mut self, kind: Kind) {
        let start = self.messages.last().map_or(0, |&(_, end)| end);
        let end = self.ids.len() as u32;
        let kind = if end == start && matches!(kind, Kind::Calls | Kind::BlockResults | Kind::LateBlockResults) {
            Kind::Other
        } else {
            kind
        };
        self.messages.push((kind, end));
    }

    pub fn push_id(&mut self, id: Option<&'a str>) {
        self.ids.push(id.filter(|s| !s.is_empty()));
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    fn kind(&self, i: usize) -> Kind {
        self.messages[i].0
    }

    /// The id a tool message or an item answers or calls (none if it was given none).
    fn result_id(&self, i: usize) -> Option<&'a str> {
        self.ids(i).first().copied().flatten()
    }

    fn ids(&self, i: usize) -> &[Option<&'a str>] {
        let start = if i == 0 { 0 } else { self.messages[i - 1].1 as usize };
        &self.ids[start..self.messages[i].1 as usize]
    }
}

/// Why a message goes. Indices are positions in the scanned history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason<'a> {
    /// An assistant message some of whose calls have no result right after it (`missing`, in call order).
    Unanswered { missing: Vec<&'a str> },
    /// An assistant message whose call number `call` (0-based) has no id.
    CallWithoutId { call: usize },
    /// An assistant message that makes two calls with the same id.
    RepeatedCallId { id: &'a str },
    /// An assistant message whose only results (the user message at `at`) were removed.
    ResultsRemoved { at: usize },
    /// A result of the group of the assistant message at `assistant`, which was removed.
    Incomplete { assistant: usize },
    /// A result for `id` that no call right before its run made; `assistant` is the message whose
    /// run it is in, if any.
    Orphan { id: &'a str, assistant: Option<usize> },
    /// A result without an id.
    NoId,
    /// A second result for `id`; the first is at `first` (the same index: two blocks of one message).
    Duplicate { id: &'a str, first: usize },
    /// A user message whose `tool_result` blocks do not all come before its other blocks.
    ResultsNotFirst,
    /// A Responses API call item no output item after it answers.
    UnansweredCall { id: &'a str },
    /// A Responses API call item with an empty `call_id`.
    CallItemWithoutId,
    /// A Responses API output item whose `call_id` no call item before it has.
    OrphanOutput { id: &'a str },
    /// A second output item for the call `id`; the first is at `first`.
    DuplicateOutput { id: &'a str, first: usize },
    /// A Responses API output item with an empty `call_id`.
    OutputWithoutId,
    /// A `reasoning` item before the call item at `call`, which was removed with every call of its run.
    ReasoningOfRemoved { call: usize },
}

impl Reason<'_> {
    /// A stable name for the reason.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Unanswered { .. } => "unanswered",
            Reason::CallWithoutId { .. } => "call_without_id",
            Reason::RepeatedCallId { .. } => "repeated_call_id",
            Reason::ResultsRemoved { .. } => "results_removed",
            Reason::Incomplete { .. } => "incomplete",
            Reason::Orphan { .. } => "orphan",
            Reason::NoId => "no_id",
            Reason::Duplicate { .. } => "duplicate",
            Reason::ResultsNotFirst => "results_not_first",
            Reason::UnansweredCall { .. } => "unanswered_call",
            Reason::CallItemWithoutId => "call_item_without_id",
            Reason::OrphanOutput { .. } => "orphan_output",
            Reason::DuplicateOutput { .. } => "duplicate_output",
            Reason::OutputWithoutId => "output_without_id",
            Reason::ReasoningOfRemoved { .. } => "reasoning_of_removed",
        }
    }

    /// The ids the reason names.
    pub fn ids(&self) -> Vec<&str> {
        match self {
            Reason::Unanswered { missing } => missing.clone(),
            Reason::RepeatedCallId { id }
            | Reason::Orphan { id, .. }
            | Reason::Duplicate { id, .. }
            | Reason::UnansweredCall { id }
            | Reason::OrphanOutput { id }
            | Reason::DuplicateOutput { id, .. } => vec![id],
            _ => Vec::new(),
        }
    }

    /// The other position the reason names: the call number, the results message, the assistant
    /// message, or the first result.
    pub fn other(&self) -> Option<usize> {
        match *self {
            Reason::CallWithoutId { call } | Reason::ReasoningOfRemoved { call } => Some(call),
            Reason::ResultsRemoved { at } => Some(at),
            Reason::Incomplete { assistant } => Some(assistant),
            Reason::Orphan { assistant, .. } => assistant,
            Reason::Duplicate { first, .. } | Reason::DuplicateOutput { first, .. } => Some(first),
            Reason::Unanswered { .. }
            | Reason::RepeatedCallId { .. }
            | Reason::NoId
            | Reason::ResultsNotFirst
            | Reason::UnansweredCall { .. }
            | Reason::CallItemWithoutId
            | Reason::OrphanOutput { .. }
            | Reason::OutputWithoutId => None,
        }
    }
}

/// One message to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal<'a> {
    pub index: usize,
    pub reason: Reason<'a>,
}

/// The messages to remove, in index order. O(n + total ids); a group's ids are matched by a linear
/// search (groups hold a handful of calls), items' ids through a hash map.
pub fn scan<'a>(facts: &Facts<'a>) -> Vec<Removal<'a>> {
    let mut out = Vec::new();
    let mut scratch = Scratch::default();
    let mut items = ItemCalls::default();
    let n = facts.len();
    let mut i = 0;
    while i < n {
        i = match facts.kind(i) {
            Kind::Other | Kind::Reasoning => i + 1,
            Kind::Calls => group(facts, i, &mut scratch, &mut out),
            Kind::ToolResult => {
                let reason = match facts.result_id(i) {
                    None => Reason::NoId,
                    Some(id) => Reason::Orphan { id, assistant: None },
                };
                out.push(Removal { index: i, reason });
                i + 1
            }
            Kind::BlockResults | Kind::LateBlockResults => {
                let ids = facts.ids(i);
                let reason = match ids.iter().find_map(|id| *id) {
                    Some(id) if ids.iter().all(Option::is_some) => Reason::Orphan { id, assistant: None },
                    _ => Reason::NoId,
                };
                out.push(Removal { index: i, reason });
                i + 1
            }
            Kind::ItemCall => {
                items.call(i, facts.result_id(i));
                i + 1
            }
            Kind::ItemOutput => {
                if let Some(reason) = items.output(i, facts.result_id(i)) {
                    out.push(Removal { index: i, reason });
                }
                i + 1
            }
        };
    }
    if !items.calls.is_empty() {
        let before = out.len();
        items.unanswered(facts, &mut out);
        if out.len() > before {
            out.sort_by_key(|r| r.index);
        }
    }
    out
}

/// The Responses API call items met so far, and which output answered each.
#[derive(Default)]
struct ItemCalls<'a> {
    /// Per call item: its index, its id, and the first output answering it.
    calls: Vec<(usize, Option<&'a str>, Option<usize>)>,
    /// The latest call with each id, by position in `calls`.
    latest: std::collections::HashMap<&'a str, usize>,
}

impl<'a> ItemCalls<'a> {
    fn call(&mut self, index: usize, id: Option<&'a str>) {
        if let Some(id) = id {
            self.latest.insert(id, self.calls.len());
        }
        self.calls.push((index, id, None));
    }

    /// Record the output at `index` for `id`; returns why it goes, if it does.
    fn output(&mut self, index: usize, id: Option<&'a str>) -> Option<Reason<'a>> {
        let Some(id) = id else {
            return Some(Reason::OutputWithoutId);
        };
        let Some(&k) = self.latest.get(id) else {
            return Some(Reason::OrphanOutput { id });
        };
        if let Some(first) = self.calls[k].2 {
            return Some(Reason::DuplicateOutput { id, first });
        }
        self.calls[k].2 = Some(index);
        None
    }

    /// The calls no output answered, and the reasoning items that go with them.
    fn unanswered(&self, facts: &Facts<'a>, out: &mut Vec<Removal<'a>>) {
        let mut removed = std::collections::HashSet::new();
        for &(index, id, answer) in &self.calls {
            let reason = match (id, answer) {
                (None, _) => Reason::CallItemWithoutId,
                (Some(id), None) => Reason::UnansweredCall { id },
                (Some(_), Some(_)) => continue,
            };
            removed.insert(index);
            out.push(Removal { index, reason });
        }
        if removed.is_empty() {
            return;
        }
        // A run of reasoning items and calls: the reasoning goes when all of the run's calls go.
        let n = facts.len();
        let mut i = 0;
        while i < n {
            if !matches!(facts.kind(i), Kind::Reasoning | Kind::ItemCall) {
                i += 1;
                continue;
            }
            let start = i;
            while i < n && matches!(facts.kind(i), Kind::Reasoning | Kind::ItemCall) {
                i += 1;
            }
            let mut calls = (start..i).filter(|&k| facts.kind(k) == Kind::ItemCall).peekable();
            let Some(&first) = calls.peek() else { continue };
            if calls.all(|k| removed.contains(&k)) {
                for k in (start..i).filter(|&k| facts.kind(k) == Kind::Reasoning) {
                    out.push(Removal {
                        index: k,
                        reason: Reason::ReasoningOfRemoved { call: first },
                    });
                }
            }
        }
    }
}

/// What is wrong with an assistant message's calls themselves, if anything.
fn calls_problem<'a>(calls: &[Option<&'a str>]) -> Option<Reason<'a>> {
    for (k, id) in calls.iter().enumerate() {
        let Some(id) = id else {
            return Some(Reason::CallWithoutId { call: k });
        };
        if calls[..k].contains(&Some(id)) {
            return Some(Reason::RepeatedCallId { id });
        }
    }
    None
}

/// Record the result at `at` for `id` among `calls`; returns why it goes, if it does.
fn answer<'a>(
    calls: &[Option<&'a str>],
    answered: &mut [Option<usize>],
    a: usize,
    at: usize,
    id: Option<&'a str>,
) -> Option<Reason<'a>> {
    let Some(id) = id else {
        return Some(Reason::NoId);
    };
    let Some(k) = calls.iter().position(|c| *c == Some(id)) else {
        return Some(Reason::Orphan { id, assistant: Some(a) });
    };
    if let Some(first) = answered[k] {
        return Some(Reason::Duplicate { id, first });
    }
    answered[k] = Some(at);
    None
}

/// Buffers reused from group to group (a history has tens of thousands of groups).
#[derive(Default)]
struct Scratch<'a> {
    /// The first result answering each call, by position in the calls.
    answered: Vec<Option<usize>>,
    /// Each result message of the group, and why it goes if it does on its own.
    results: Vec<(usize, Option<Reason<'a>>)>,
}

/// Scan the group of the assistant message at `a` (its calls and their results); returns where
/// the next group starts.
fn group<'a>(facts: &Facts<'a>, a: usize, scratch: &mut Scratch<'a>, out: &mut Vec<Removal<'a>>) -> usize {
    let calls = facts.ids(a);
    let Scratch { answered, results } = scratch;
    answered.clear();
    answered.resize(calls.len(), None);
    results.clear();
    let n = facts.len();
    let mut end = a + 1;
    while end < n && facts.kind(end) == Kind::ToolResult {
        results.push((end, answer(calls, answered, a, end, facts.result_id(end))));
        end += 1;
    }
    let mut results_removed = None;
    if end == a + 1 && end < n && matches!(facts.kind(end), Kind::BlockResults | Kind::LateBlockResults) {
        // Anthropic: the blocks of the one user message right after; all or nothing.
        let mut problem = None;
        for &id in facts.ids(end) {
            let reason = answer(calls, answered, a, end, id);
            problem = problem.or(reason);
        }
        if facts.kind(end) == Kind::LateBlockResults {
            problem = problem.or(Some(Reason::ResultsNotFirst));
        }
        if problem.is_some() {
            results_removed = Some(Reason::ResultsRemoved { at: end });
            answered.fill(None);
        }
        results.push((end, problem));
        end += 1;
    }
    let assistant_reason = calls_problem(calls).or(results_removed).or_else(|| {
        let missing: Vec<&'a str> = calls
            .iter()
            .zip(answered.iter())
            .filter(|(_, first)| first.is_none())
            .filter_map(|(id, _)| *id)
            .collect();
        (!missing.is_empty()).then_some(Reason::Unanswered { missing })
    });
    let complete = assistant_reason.is_none();
    if let Some(reason) = assistant_reason {
        out.push(Removal { index: a, reason });
    }
    for (index, reason) in results.drain(..) {
        match reason {
            Some(reason) => out.push(Removal { index, reason }),
            None if !complete => out.push(Removal {
                index,
                reason: Reason::Incomplete { assistant: a },
            }),
            None => {}
        }
    }
    end
}

// The scan reads stored messages by comparing one-byte key codes, not key names (a third of the
// scan's time went to `memcmp` otherwise): see `message::key`.
use crate::core::message::key::{CONTENT, ID, TOOL_CALL_ID, TOOL_CALLS, TOOL_USE_ID, TYPE};

/// The value under the well-known key `code` in a dict.
fn field(dict: Items<'_>, code: usize) -> Option<ValueRef<'_>> {
    dict.keyed_entries().find(|(k, _)| k.code == Some(code)).map(|(_, v)| v)
}

fn str_field(value: ValueRef<'_>, code: usize) -> Option<&str> {
    field(value.as_dict()?, code).and_then(ValueRef::as_str)
}

/// The kind of one stored message, calling `id` with each of its ids in order; its role comes
/// from the store. (A kind with no ids is taken as `Other` by [`Facts::finish`].)
pub fn stored_kind<'a>(role: Role, message: ValueRef<'a>, id: &mut impl FnMut(Option<&'a str>)) -> Kind {
    let Some(fields) = message.as_dict() else {
        return Kind::Other;
    };
    // One pass over the keys: this runs once per stored message, on a cache miss.
    let (mut item_type, mut content, mut calls, mut tool_call_id, mut call_id) = (None, None, None, None, None);
    for (key, value) in fields.keyed_entries() {
        match key.code {
            Some(TYPE) => item_type = value.as_str(),
            Some(CONTENT) => content = Some(value),
            Some(TOOL_CALLS) => calls = Some(value),
            Some(TOOL_CALL_ID) => tool_call_id = Some(value),
            None if key.name == "call_id" => call_id = Some(value),
            _ => {}
        }
    }
    if let Some(item_type) = item_type
        && item_type != "message"
    {
        let call_id = call_id.filter(|v| !v.is_null());
        let kind = item_kind(item_type, call_id.is_some());
        if matches!(kind, Kind::ItemCall | Kind::ItemOutput) {
            id(call_id.and_then(ValueRef::as_str));
        }
        return kind;
    }
    match role {
        Role::Assistant => {
            if let Some(calls) = calls.and_then(ValueRef::as_list) {
                calls.values().for_each(|call| id(str_field(call, ID)));
            }
            if let Some(content) = content {
                block_ids(content, "tool_use", ID, id);
            }
            Kind::Calls
        }
        Role::Tool => {
            id(tool_call_id.and_then(ValueRef::as_str));
            Kind::ToolResult
        }
        Role::User => match content {
            Some(content) if block_ids(content, "tool_result", TOOL_USE_ID, id) => Kind::LateBlockResults,
            _ => Kind::BlockResults,
        },
        Role::System | Role::Developer => Kind::Other,
    }
}

/// The kind of a Responses API item (a `type` other than `message`) from its type and whether it
/// has a `call_id` (not None): a call or an output of a tool the caller runs, a reasoning item, or
/// another item. An output without a `call_id` (the API lets a function call's output leave it out)
/// pairs with nothing. Calls and outputs have one id, their `call_id`.
pub fn item_kind(item_type: &str, has_call_id: bool) -> Kind {
    if is_call_type(item_type) {
        Kind::ItemCall
    } else if is_output_type(item_type) && has_call_id {
        Kind::ItemOutput
    } else if item_type == "reasoning" {
        Kind::Reasoning
    } else {
        Kind::Other
    }
}

/// Call `id` with the id under `key` of each block of type `kind` in a list content; returns
/// whether such a block comes after a block of another type.
fn block_ids<'a>(content: ValueRef<'a>, kind: &str, key: usize, id: &mut impl FnMut(Option<&'a str>)) -> bool {
    let Some(blocks) = content.as_list() else {
        return false;
    };
    let (mut other, mut late) = (false, false);
    for block in blocks.values() {
        if str_field(block, TYPE) == Some(kind) {
            id(str_field(block, key));
            late |= other;
        } else {
            other = true;
        }
    }
    late
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A history in a tiny notation: `a:x,y` calls x and y, `t:x` answers x (`t:` has no id),
    /// `u:x,y` is a user message with results for x and y (`l:x,y` the same with a text block
    /// first), `f:x` is a call item for x and `o:x` its output item, `r` a reasoning item,
    /// anything else is an `Other` message.
    fn facts(spec: &'static str) -> Facts<'static> {
        let mut f = Facts::default();
        for word in spec.split_whitespace() {
            let (kind, ids) = match word.split_once(':') {
                Some(("a", ids)) => (Kind::Calls, ids),
                Some(("t", ids)) => (Kind::ToolResult, ids),
                Some(("u", ids)) => (Kind::BlockResults, ids),
                Some(("l", ids)) => (Kind::LateBlockResults, ids),
                Some(("f", ids)) => (Kind::ItemCall, ids),
                Some(("o", ids)) => (Kind::ItemOutput, ids),
                _ if word == "r" => (Kind::Reasoning, ""),
                _ => (Kind::Other, ""),
            };
            if matches!(kind, Kind::ToolResult | Kind::ItemCall | Kind::ItemOutput) {
                f.push_id(Some(ids));
            } else {
                ids.split(',').filter(|s| !s.is_empty()).for_each(|id| {
                    f.push_id(if id == "_" { None } else { Some(id) });
                });
            }
            f.finish(kind);
        }
        f
    }

    fn removed(spec: &'static str) -> Vec<(usize, &'static str)> {
        scan(&facts(spec)).iter().map(|r| (r.index, r.reason.code())).collect()
    }

    #[test]
    fn complete_groups_and_plain_messages_stay() {
        assert!(removed("s u a:x,y t:y t:x a").is_empty());
        assert!(removed("s u a:x u:x a u a:x u:x").is_empty());
        assert!(removed("").is_empty());
    }

    #[test]
    fn an_unanswered_group_goes_with_its_partial_results() {
        assert_eq!(removed("u a:x,y t:x u"), [(1, "unanswered"), (2, "incomplete")]);
        let r = scan(&facts("u a:x,y t:x"));
        assert_eq!(r[0].reason, Reason::Unanswered { missing: vec!["y"] });
        assert_eq!(r[1].reason, Reason::Incomplete { assistant: 1 });
        assert_eq!(removed("u a:x"), [(1, "unanswered")]);
        assert_eq!(removed("a:x,y u:x"), [(0, "unanswered"), (1, "incomplete")]);
    }

    #[test]
    fn results_answer_only_the_message_right_before_their_run() {
        assert_eq!(removed("a:x u t:x"), [(0, "unanswered"), (2, "orphan")]);
        assert_eq!(removed("u t:x"), [(1, "orphan")]);
        assert_eq!(removed("a:x t:x u:x"), [(2, "orphan")]);
        assert_eq!(removed("a:x a:x t:x"), [(0, "unanswered")]);
    }

    #[test]
    fn orphans_duplicates_and_missing_ids_go_alone() {
        let r = scan(&facts("a:x t:x t:z t:x t:"));
        let reasons: Vec<_> = r.iter().map(|r| (r.index, r.reason.clone())).collect();
        assert_eq!(
            reasons,
            [
                (
                    2,
                    Reason::Orphan {
                        id: "z",
                        assistant: Some(0)
                    }
                ),
                (3, Reason::Duplicate { id: "x", first: 1 }),
                (4, Reason::NoId),
            ]
        );
    }

    #[test]
    fn broken_calls_take_their_results_with_them() {
        assert_eq!(removed("a:x,_ t:x"), [(0, "call_without_id"), (1, "incomplete")]);
        assert_eq!(
            removed("a:x,x t:x t:x"),
            [(0, "repeated_call_id"), (1, "incomplete"), (2, "duplicate")]
        );
    }

    #[test]
    fn one_bad_block_removes_the_whole_result_message_and_its_group() {
        let r = scan(&facts("a:x u:x,z"));
        assert_eq!(r[0].reason, Reason::ResultsRemoved { at: 1 });
        assert_eq!(
            r[1].reason,
            Reason::Orphan {
                id: "z",
                assistant: Some(0)
            }
        );
        assert_eq!(removed("a:x u:x,x")[1], (1, "duplicate"));
        assert_eq!(removed("a:x u:x,_")[1], (1, "no_id"));
        assert_eq!(removed("u:_ a"), [(0, "no_id")]);
        assert_eq!(removed("a:x l:x"), [(0, "results_removed"), (1, "results_not_first")]);
        assert_eq!(removed("a:x l:z")[1], (1, "orphan"));
        assert_eq!(removed("u l:x"), [(1, "orphan")]);
    }

    #[test]
    fn reused_ids_pair_by_position() {
        assert_eq!(removed("a:x t:x a:x u a:x t:x"), [(2, "unanswered")]);
        assert_eq!(
            removed("a:x u t:x a:x t:x t:x"),
            [(0, "unanswered"), (2, "orphan"), (5, "duplicate")]
        );
    }

    #[test]
    fn items_pair_by_call_id_anywhere_after_the_call() {
        assert!(removed("u r f:x f:y o:y o:x m").is_empty());
        assert!(removed("u f:x m o:x f:y u o:y").is_empty());
        assert_eq!(removed("u f:x f:y o:x"), [(2, "unanswered_call")]);
        assert_eq!(removed("u o:x f:x"), [(1, "orphan_output"), (2, "unanswered_call")]);
        assert_eq!(
            removed("f:x o:x o:x o:z o:"),
            [(2, "duplicate_output"), (3, "orphan_output"), (4, "output_without_id")]
        );
        assert_eq!(scan(&facts("f:x o:x o:x"))[0].reason.other(), Some(1));
        assert_eq!(removed("f: o:x"), [(0, "call_item_without_id"), (1, "orphan_output")]);
        // A reused id: the output answers the latest call with it.
        assert_eq!(removed("f:x f:x o:x"), [(0, "unanswered_call")]);
        assert_eq!(removed("f:x o:x f:x o:x"), Vec::<(usize, &str)>::new());
    }

    #[test]
    fn reasoning_goes_with_its_run_of_calls_only_when_all_of_them_go() {
        let r = scan(&facts("u r r f:x f:y u"));
        let found: Vec<_> = r.iter().map(|r| (r.index, r.reason.clone())).collect();
        assert_eq!(
            found,
            [
                (1, Reason::ReasoningOfRemoved { call: 3 }),
                (2, Reason::ReasoningOfRemoved { call: 3 }),
                (3, Reason::UnansweredCall { id: "x" }),
                (4, Reason::UnansweredCall { id: "y" }),
            ]
        );
        assert_eq!(removed("u r f:x f:y o:y"), [(2, "unanswered_call")]);
        assert!(removed("u r m r").is_empty());
    }

    #[test]
    fn items_and_chat_messages_pair_apart() {
        assert_eq!(removed("a:x o:x"), [(0, "unanswered"), (1, "orphan_output")]);
        assert_eq!(removed("f:x t:x"), [(0, "unanswered_call"), (1, "orphan")]);
        assert!(removed("a:x t:x f:x o:x").is_empty());
    }

    #[test]
    fn calls_or_results_without_ids_are_other_messages() {
        let mut f = Facts::default();
        f.finish(Kind::Calls);
        f.finish(Kind::BlockResults);
        assert!(scan(&f).is_empty());
        f.finish(Kind::ToolResult);
        assert_eq!(scan(&f)[0].reason, Reason::NoId);
    }
}
