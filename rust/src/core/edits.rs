//! Context edits, as Anthropic's API names them: clear old tool uses (`clear_tool_uses_20250919`)
//! and old thinking (`clear_thinking_20251015`), planned over the visible messages in any of the
//! three formats (Chat Completions, Anthropic blocks, Responses items). A plan never deletes a
//! message the pair rules need: a cleared tool result is the same message with its output replaced
//! by a placeholder, its pair id (`tool_call_id`, `tool_use_id`, `call_id`) and every other key as
//! they were, so a history valid before an edit is valid after it. The store applies a plan as a
//! new batch (`core/store/edits.rs`); the originals stay stored. Semantics: `docs/context-edits.md`.

use std::collections::{BTreeMap, HashMap};

use crate::core::arena::{Arena, NodeId};
use crate::core::cow_vec::CowVec;
use crate::core::message::{is_call_type, is_output_type};
use crate::core::roles::Role;
use crate::core::tokens::Encoding;
use crate::core::turns::{Thinking, opens_turn};
use crate::core::value::{Encoder, Value, ValueRef};

/// The placeholder a cleared tool result gets when none is given; `{name}` and `{id}` are the
/// tool's name and the call's id.
pub const DEFAULT_PLACEHOLDER: &str = "[tool result cleared to save context: the output of {name} (call {id}) is \
     kept outside the window; call {name} again if you need it]";

/// CLEAR TOOL USES: what to clear and how the tokens are counted.
#[derive(Debug, Clone)]
pub struct ClearToolUses {
    /// Clear only when the visible messages cost more than this many tokens (None: always).
    pub trigger: Option<u64>,
    /// The most recent tool uses (calls, in order) that stay as they are.
    pub keep: usize,
    /// Clear nothing unless at least this many tokens would be cleared.
    pub clear_at_least: u64,
    /// Tools whose uses are never cleared.
    pub exclude_tools: Vec<String>,
    /// Also clear the inputs of the cleared calls (the arguments become `{}`).
    pub clear_tool_inputs: bool,
    /// The text a cleared result gets (`{name}`, `{id}` filled in).
    pub placeholder: String,
    pub encoding: Encoding,
    pub thinking: Thinking,
}

/// CLEAR THINKING: the thinking of the last `keep_turns` turns that have some stays.
#[derive(Debug, Clone)]
pub struct ClearThinking {
    pub keep_turns: usize,
    pub encoding: Encoding,
    pub thinking: Thinking,
}

/// One change to the visible list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The message at this position becomes this encoding.
    Replace(usize, Vec<u8>),
    /// The message at this position leaves the visible list.
    Hide(usize),
}

/// What an edit changes, and what it reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// In position order, at most one change a position.
    pub changes: Vec<Change>,
    pub cleared_tool_uses: usize,
    pub cleared_thinking_turns: usize,
    /// The tokens the edit saves: the visible messages' count before less the count after.
    pub cleared_input_tokens: u64,
    /// CLEAR TOOL USES: the position before which no later edit with the same settings changes
    /// anything, as long as the messages before it stay as they are.
    pub settled: usize,
}

/// One step of a path into a message: a dict key or a list index.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    At(usize),
}

/// `value` with the value at `path` replaced by what `leaf` writes (a missing last key is added at
/// the end of its dict); everything else is copied as it is encoded.
fn rewrite(value: ValueRef<'_>, path: &[Step<'_>], leaf: &dyn Fn(&mut Encoder<'_>), e: &mut Encoder<'_>) {
    let Some((step, rest)) = path.split_first() else {
        return leaf(e);
    };
    match (value.get(), *step) {
        (Value::Dict(fields), Step::Key(name)) => {
            let has = fields.entries().any(|(k, _)| k == name);
            let d = e.open_dict(fields.count + usize::from(!has));
            for (key, v) in fields.entries() {
                e.key(key);
                if key == name {
                    rewrite(v, rest, leaf, e);
                } else {
                    e.raw(v);
                }
            }
            if !has {
                e.key(name);
                leaf(e);
            }
            e.close(d);
        }
        (Value::List(items), Step::At(at)) => {
            let l = e.open_list(items.count);
            for (i, v) in items.values().enumerate() {
                if i == at {
                    rewrite(v, rest, leaf, e);
                } else {
                    e.raw(v);
                }
            }
            e.close(l);
        }
        _ => e.raw(value),
    }
}

fn rewritten(message: &[u8], path: &[Step<'_>], leaf: &dyn Fn(&mut Encoder<'_>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    rewrite(ValueRef::new(message), path, leaf, &mut Encoder::new(&mut out));
    out
}

/// Where a call's input or a result's output sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Site {
    /// A chat message's `tool_calls[i]` (its `function.arguments`, or `custom.input`).
    ChatCall(usize),
    /// An Anthropic `tool_use` block `content[i]` (its `input`).
    UseBlock(usize),
    /// A Responses call item (its `arguments`, or `input`).
    CallItem,
    /// A chat `tool` message (its `content`).
    ToolMessage,
    /// An Anthropic `tool_result` block `content[i]` (its `content`).
    ResultBlock(usize),
    /// A Responses output item (its `output`).
    OutputItem,
}

#[derive(Debug, Clone)]
struct ToolUse<'a> {
    call: (usize, Site),
    id: &'a str,
    name: &'a str,
    result: Option<(usize, Site)>,
}

fn str_field<'a>(value: ValueRef<'a>, key: &str) -> Option<&'a str> {
    value.field(key).and_then(ValueRef::as_str)
}

/// Every tool use of `messages`, in call order, each with the result that answers it (the first
/// result after it with its id, before another call reuses the id).
fn tool_uses<'a>(messages: &[ValueRef<'a>], roles: &[Role], offset: usize) -> Vec<ToolUse<'a>> {
    let mut uses: Vec<ToolUse<'a>> = Vec::new();
    let mut latest: HashMap<&'a str, usize> = HashMap::new();
    let call = |uses: &mut Vec<ToolUse<'a>>,
                latest: &mut HashMap<&'a str, usize>,
                pos: usize,
                site: Site,
                id: Option<&'a str>,
                name: &'a str| {
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            latest.insert(id, uses.len());
            uses.push(ToolUse {
                call: (pos, site),
                id,
                name,
                result: None,
            });
        }
    };
    let mut answers: Vec<(usize, Site, &'a str)> = Vec::new();
    for (i, (&message, &role)) in messages.iter().zip(roles).enumerate() {
        let pos = offset + i;
        answers.clear();
        let item_type = str_field(message, "type");
        match item_type {
            Some(t) if is_call_type(t) => {
                call(
                    &mut uses,
                    &mut latest,
                    pos,
                    Site::CallItem,
                    str_field(message, "call_id"),
                    str_field(message, "name").unwrap_or(""),
                );
            }
            Some(t) if is_output_type(t) => {
                if let Some(id) = str_field(message, "call_id") {
                    answers.push((pos, Site::OutputItem, id));
                }
            }
            Some(t) if t != "message" => {}
            _ => match role {
                Role::Assistant => {
                    if let Some(calls) = message.field("tool_calls").and_then(ValueRef::as_list) {
                        for (i, c) in calls.values().enumerate() {
                            let function = c.field("function").or_else(|| c.field("custom"));
                            let name = function.and_then(|f| str_field(f, "name")).unwrap_or("");
                            call(&mut uses, &mut latest, pos, Site::ChatCall(i), str_field(c, "id"), name);
                        }
                    }
                    if let Some(blocks) = message.field("content").and_then(ValueRef::as_list) {
                        for (i, b) in blocks.values().enumerate() {
                            if str_field(b, "type") == Some("tool_use") {
                                call(
                                    &mut uses,
                                    &mut latest,
                                    pos,
                                    Site::UseBlock(i),
                                    str_field(b, "id"),
                                    str_field(b, "name").unwrap_or(""),
                                );
                            }
                        }
                    }
                }
                Role::Tool => {
                    if let Some(id) = str_field(message, "tool_call_id") {
                        answers.push((pos, Site::ToolMessage, id));
                    }
                }
                Role::User => {
                    if let Some(blocks) = message.field("content").and_then(ValueRef::as_list) {
                        for (i, b) in blocks.values().enumerate() {
                            if str_field(b, "type") == Some("tool_result")
                                && let Some(id) = str_field(b, "tool_use_id")
                            {
                                answers.push((pos, Site::ResultBlock(i), id));
                            }
                        }
                    }
                }
                _ => {}
            },
        }
        for &(pos, site, id) in &answers {
            if let Some(k) = latest.remove(id) {
                uses[k].result = Some((pos, site));
            }
        }
    }
    uses
}

/// The path to a call's input or a result's output, and whether the call is a custom one (its
/// input is free text, cleared to `""`, not a JSON `{}`).
fn site_path(message: ValueRef<'_>, site: Site) -> (Vec<Step<'static>>, bool) {
    match site {
        Site::ChatCall(i) => {
            let custom = message
                .field("tool_calls")
                .and_then(ValueRef::as_list)
                .and_then(|l| l.values().nth(i))
                .is_some_and(|c| c.field("function").is_none() && c.field("custom").is_some());
            let path = if custom {
                vec![
                    Step::Key("tool_calls"),
                    Step::At(i),
                    Step::Key("custom"),
                    Step::Key("input"),
                ]
            } else {
                vec![
                    Step::Key("tool_calls"),
                    Step::At(i),
                    Step::Key("function"),
                    Step::Key("arguments"),
                ]
            };
            (path, custom)
        }
        Site::UseBlock(i) => (vec![Step::Key("content"), Step::At(i), Step::Key("input")], false),
        Site::CallItem => {
            let custom = message.field("arguments").is_none() && message.field("input").is_some();
            (vec![Step::Key(if custom { "input" } else { "arguments" })], custom)
        }
        Site::ToolMessage => (vec![Step::Key("content")], false),
        Site::ResultBlock(i) => (vec![Step::Key("content"), Step::At(i), Step::Key("content")], false),
        Site::OutputItem => (vec![Step::Key("output")], false),
    }
}

fn at_path<'a>(mut value: ValueRef<'a>, path: &[Step<'_>]) -> Option<ValueRef<'a>> {
    for step in path {
        value = match *step {
            Step::Key(k) => value.field(k)?,
            Step::At(i) => value.as_list()?.values().nth(i)?,
        };
    }
    Some(value)
}

/// Whether a call's input is already empty (`{}`, `"{}"`, `""`).
fn input_is_empty(value: Option<ValueRef<'_>>) -> bool {
    match value.map(ValueRef::get) {
        None => true,
        Some(Value::Str(s)) => matches!(s.trim(), "" | "{}"),
        Some(Value::Dict(d)) => d.count == 0,
        _ => false,
    }
}

/// The placeholder text for one tool use.
pub fn placeholder_for(template: &str, name: &str, id: &str) -> String {
    template.replace("{name}", name).replace("{id}", id)
}

/// The tokens a message costs in a request: its count, less its thinking when it belongs to an
/// earlier turn and the rule drops that.
fn cost(encoding: Encoding, thinking: Thinking, message: ValueRef<'_>, earlier: bool) -> u64 {
    let (count, thought) = encoding.count_message_parts(message);
    if earlier && thinking == Thinking::DropEarlier {
        count - thought
    } else {
        count
    }
}

/// The visible messages an edit reads: those from position `offset` on (the ones before it are
/// known to need nothing), with their roles.
pub struct Visible<'s> {
    pub offset: usize,
    pub messages: Vec<ValueRef<'s>>,
    pub roles: Vec<Role>,
    /// The position of the message that opens the current turn (earlier positions are earlier turns).
    pub turn: usize,
}

impl<'s> Visible<'s> {
    /// The visible `ids` from `offset` on. O(n - offset), plus a walk back to the current turn.
    pub fn of(arena: &'s Arena, ids: &CowVec<NodeId>, offset: usize) -> Self {
        let len = ids.len();
        let offset = offset.min(len);
        let messages: Vec<ValueRef<'s>> = ids.range(offset..len).map(|id| arena.message(id)).collect();
        let roles = ids.range(offset..len).map(|id| arena.role(id)).collect();
        let turn = (0..len)
            .rev()
            .find(|&pos| arena.role(ids[pos]) == Role::User && opens_turn(arena.message(ids[pos])))
            .unwrap_or(0);
        Self {
            offset,
            messages,
            roles,
            turn,
        }
    }

    fn message(&self, pos: usize) -> ValueRef<'s> {
        self.messages[pos - self.offset]
    }
}

/// Plan CLEAR TOOL USES over the visible messages (the trigger is the caller's to check).
/// `old_cost(pos)` is what the message at `pos` costs now (the store's cached count). A message is
/// changed only when its new form costs fewer tokens, so an edit never grows the window. O(n + the
/// text of the messages changed).
pub fn plan_tool_uses(visible: &Visible<'_>, edit: &ClearToolUses, old_cost: &mut dyn FnMut(usize) -> u64) -> Plan {
    let uses = tool_uses(&visible.messages, &visible.roles, visible.offset);
    let end = uses.len().saturating_sub(edit.keep);
    // Every use before this position is settled: no later edit with the same settings changes it
    // (it is not among the kept, and its result comes before the first kept call).
    let first_kept = uses
        .get(end)
        .map_or(visible.offset + visible.messages.len(), |u| u.call.0);
    let settled = uses[..end]
        .iter()
        .filter(|u| u.result.is_none_or(|(pos, _)| pos >= first_kept))
        .map(|u| u.call.0)
        .fold(first_kept, usize::min);
    // Per message: the sites to rewrite, each with the use it belongs to and its new leaf.
    let mut sites: BTreeMap<usize, Vec<(usize, Site, Option<String>)>> = BTreeMap::new();
    for (k, u) in uses[..end].iter().enumerate() {
        if edit.exclude_tools.iter().any(|t| t == u.name) {
            continue;
        }
        if let Some((pos, site)) = u.result {
            let text = placeholder_for(&edit.placeholder, u.name, u.id);
            let (path, _) = site_path(visible.message(pos), site);
            if at_path(visible.message(pos), &path).and_then(ValueRef::as_str) != Some(text.as_str()) {
                sites.entry(pos).or_default().push((k, site, Some(text)));
            }
        }
        if edit.clear_tool_inputs {
            let (pos, site) = u.call;
            let (path, _) = site_path(visible.message(pos), site);
            if !input_is_empty(at_path(visible.message(pos), &path)) {
                sites.entry(pos).or_default().push((k, site, None));
            }
        }
    }
    let mut plan = Plan {
        settled,
        ..Plan::default()
    };
    let mut cleared = vec![false; end];
    for (pos, edits) in sites {
        let mut bytes = visible.message(pos).bytes().to_vec();
        for (_, site, text) in &edits {
            let (path, custom) = site_path(ValueRef::new(&bytes), *site);
            bytes = match text {
                Some(t) => rewritten(&bytes, &path, &|e| e.str(t)),
                None if custom => rewritten(&bytes, &path, &|e| e.str("")),
                None if matches!(site, Site::UseBlock(_)) => rewritten(&bytes, &path, &|e| {
                    let d = e.open_dict(0);
                    e.close(d);
                }),
                None => rewritten(&bytes, &path, &|e| e.str("{}")),
            };
        }
        let earlier = pos < visible.turn;
        let before = old_cost(pos);
        let after = cost(edit.encoding, edit.thinking, ValueRef::new(&bytes), earlier);
        if after < before {
            plan.cleared_input_tokens += before - after;
            plan.changes.push(Change::Replace(pos, bytes));
            for (k, _, _) in edits {
                cleared[k] = true;
            }
        }
    }
    plan.cleared_tool_uses = cleared.iter().filter(|&&c| c).count();
    if plan.cleared_input_tokens < edit.clear_at_least {
        // Nothing is cleared, and nothing settled: a later edit must look at all of it again.
        return Plan {
            settled: visible.offset,
            ..Plan::default()
        };
    }
    plan
}

fn is_thinking_block(block: ValueRef<'_>) -> bool {
    matches!(str_field(block, "type"), Some("thinking" | "redacted_thinking"))
}

/// What of a message is thinking: a Responses `reasoning` item is thinking as a whole; an
/// assistant message's thinking blocks are (`Some(blocks kept)`, `None` when it has none).
enum Thought {
    None,
    Item,
    Blocks,
}

fn thought(message: ValueRef<'_>, role: Role) -> Thought {
    if str_field(message, "type") == Some("reasoning") {
        return Thought::Item;
    }
    if role == Role::Assistant
        && let Some(blocks) = message.field("content").and_then(ValueRef::as_list)
        && blocks.values().any(is_thinking_block)
    {
        return Thought::Blocks;
    }
    Thought::None
}

/// Plan CLEAR THINKING: the thinking of every turn but the last `keep_turns` turns that have some
/// is cleared: thinking blocks leave their message (a message holding nothing but thinking keeps
/// it: an empty assistant message is refused by the APIs), `reasoning` items leave the visible
/// list. O(n + the text of the messages changed).
pub fn plan_thinking(visible: &Visible<'_>, edit: &ClearThinking, old_cost: &mut dyn FnMut(usize) -> u64) -> Plan {
    // Turn number of each message: it rises at each message that opens a user turn.
    let mut turn = 0usize;
    let mut with_thought: Vec<(usize, usize)> = Vec::new(); // (pos, turn)
    for (i, (&m, &role)) in visible.messages.iter().zip(&visible.roles).enumerate() {
        let pos = visible.offset + i;
        if role == Role::User && opens_turn(m) {
            turn += 1;
        }
        if !matches!(thought(m, role), Thought::None) {
            with_thought.push((pos, turn));
        }
    }
    let mut turns: Vec<usize> = with_thought.iter().map(|&(_, t)| t).collect();
    turns.dedup();
    let Some(&first_kept) = turns.len().checked_sub(edit.keep_turns).and_then(|i| turns.get(i)) else {
        return Plan::default();
    };
    let mut plan = Plan::default();
    let mut cleared_turns: Vec<usize> = Vec::new();
    for &(pos, t) in with_thought.iter().filter(|&&(_, t)| t < first_kept) {
        let message = visible.message(pos);
        let earlier = pos < visible.turn;
        let before = old_cost(pos);
        let change = match thought(message, visible.roles[pos - visible.offset]) {
            Thought::Item => Some((Change::Hide(pos), 0)),
            Thought::Blocks => {
                let blocks: Vec<ValueRef<'_>> = message
                    .field("content")
                    .and_then(ValueRef::as_list)
                    .map(|l| l.values().filter(|b| !is_thinking_block(*b)).collect())
                    .unwrap_or_default();
                (!blocks.is_empty()).then(|| {
                    let bytes = rewritten(message.bytes(), &[Step::Key("content")], &|e| {
                        let l = e.open_list(blocks.len());
                        for b in &blocks {
                            e.raw(*b);
                        }
                        e.close(l);
                    });
                    let after = cost(edit.encoding, edit.thinking, ValueRef::new(&bytes), earlier);
                    (Change::Replace(pos, bytes), after)
                })
            }
            Thought::None => None,
        };
        if let Some((change, after)) = change {
            plan.cleared_input_tokens += before.saturating_sub(after);
            plan.changes.push(change);
            if cleared_turns.last() != Some(&t) {
                cleared_turns.push(t);
            }
        }
    }
    plan.cleared_thinking_turns = cleared_turns.len();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::value::encode_json;

    fn encode(value: &serde_json::Value) -> Vec<u8> {
        let mut buf = Vec::new();
        encode_json(&mut Encoder::new(&mut buf), value);
        buf
    }

    fn json(bytes: &[u8]) -> serde_json::Value {
        let mut out = String::new();
        crate::core::value::write_value(&mut out, ValueRef::new(bytes));
        serde_json::from_str(&out).unwrap()
    }

    fn role_of(m: &serde_json::Value) -> Role {
        match m["role"].as_str() {
            Some(r) => Role::parse(r).unwrap(),
            None if m["type"].as_str().is_some_and(|t| t.ends_with("_output")) => Role::Tool,
            None => Role::Assistant,
        }
    }

    fn run(history: &[serde_json::Value], edit: &ClearToolUses) -> (Plan, Vec<serde_json::Value>) {
        let encoded: Vec<Vec<u8>> = history.iter().map(encode).collect();
        let visible = Visible {
            offset: 0,
            messages: encoded.iter().map(|b| ValueRef::new(b)).collect(),
            roles: history.iter().map(role_of).collect(),
            turn: 0,
        };
        let plan = plan_tool_uses(&visible, edit, &mut |pos| {
            edit.encoding.count_message_parts(visible.messages[pos]).0
        });
        let mut out = history.to_vec();
        for change in &plan.changes {
            if let Change::Replace(pos, bytes) = change {
                out[*pos] = json(bytes);
            }
        }
        (plan, out)
    }

    fn edit(keep: usize, inputs: bool) -> ClearToolUses {
        ClearToolUses {
            trigger: None,
            keep,
            clear_at_least: 0,
            exclude_tools: vec!["keep_me".into()],
            clear_tool_inputs: inputs,
            placeholder: "cleared {name} {id}".into(),
            encoding: Encoding::O200kBase,
            thinking: Thinking::DropEarlier,
        }
    }

    const LONG: &str = "a long tool output that costs many more tokens than the placeholder does, by far";

    #[test]
    fn chat_results_are_cleared_and_keep_their_ids() {
        use serde_json::json;
        let history = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"q\": \"long question here\"}"}},
                {"id": "b", "type": "function", "function": {"name": "keep_me", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "a", "content": LONG}),
            json!({"role": "tool", "tool_call_id": "b", "content": LONG}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c", "content": LONG, "name": "f"}),
        ];
        let (plan, out) = run(&history, &edit(1, true));
        assert_eq!(plan.cleared_tool_uses, 1);
        assert_eq!(
            out[2],
            json!({"role": "tool", "tool_call_id": "a", "content": "cleared f a"})
        );
        assert_eq!(out[3], history[3], "an excluded tool is never cleared");
        assert_eq!(out[5], history[5], "the last `keep` uses stay");
        assert_eq!(out[1]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(out[1]["tool_calls"][0]["id"], "a");
        // A second run finds nothing left to clear.
        let (again, _) = run(&out, &edit(1, true));
        assert!(again.changes.is_empty() && again.cleared_tool_uses == 0);
    }

    #[test]
    fn anthropic_blocks_and_responses_items_are_cleared_in_place() {
        use serde_json::json;
        let history = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "u1", "name": "f", "input": {"q": "a long question to clear"}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "u1", "content": [{"type": "text", "text": LONG}]}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "g", "arguments": "{\"x\": 1}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": LONG}),
            json!({"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c2", "output": LONG}),
        ];
        let (plan, out) = run(&history, &edit(1, true));
        assert_eq!(plan.cleared_tool_uses, 2);
        assert_eq!(out[1]["content"][1]["input"], json!({}));
        assert_eq!(
            out[2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "u1", "content": "cleared f u1"})
        );
        assert_eq!(out[3]["arguments"], "{}");
        assert_eq!(
            out[4],
            json!({"type": "function_call_output", "call_id": "c1", "output": "cleared g c1"})
        );
        assert_eq!(out[6], history[6]);
    }

    #[test]
    fn clear_at_least_and_short_results_clear_nothing() {
        use serde_json::json;
        let history = vec![
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "ok"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "b", "content": LONG}),
        ];
        let (plan, _) = run(&history, &edit(0, false));
        assert_eq!(plan.cleared_tool_uses, 1, "a result shorter than its placeholder stays");
        let mut strict = edit(0, false);
        strict.clear_at_least = plan.cleared_input_tokens + 1;
        assert!(run(&history, &strict).0.changes.is_empty());
    }
}
