//! Batch processing of conversation datasets: a pipeline of steps applied to each conversation
//! on its own, many conversations at a time on a thread pool, from bytes in to bytes out.
//!
//! Each conversation is appended to a fresh [`Store`] (so the message rules are the store's own,
//! [`crate::core::message::check`]), the steps run as the store's operations (sanitize, trim,
//! truncate, filter, clear: the same semantics as `MessageArray`, not a copy of them), and what is
//! left visible comes out as positions into the input, so a kept message is written back as the
//! very bytes it was read from. See `docs/batch.md`.

pub mod jsonl;
pub mod parse;
pub mod record;

use crate::core::config::{Budget, Conditions, Cuts, Encoding};
use crate::core::edits::ClearToolUses;
use crate::core::error::{Error, Result, quoted};
use crate::core::store::{Incoming, Store, numbers_within_limits};

/// The wire format the messages of a dataset are in. Each format brings its own message rules;
/// chat messages, Anthropic messages (blocks live in `content`) and Responses API items are all
/// read by the store's one rule set ([`crate::core::message::check`]), so they share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Chat,
    Anthropic,
    Responses,
}

impl Format {
    pub fn parse(name: &str) -> Result<Format> {
        match name {
            "chat" | "openai" => Ok(Format::Chat),
            "anthropic" => Ok(Format::Anthropic),
            "responses" => Ok(Format::Responses),
            other => Err(Error::InvalidOperation(format!(
                "batch: unknown format {}: expected chat, anthropic or responses",
                quoted(other)
            ))),
        }
    }

    /// Encode and check one message given as JSON text; `path` names it in errors (`messages[3]`).
    /// The reference reading: the rules of `MessageArray.from_json` (numbers included), which
    /// the single-pass reader ([`parse::scan`]) gives way to whenever it is not sure.
    pub fn add_json(self, incoming: &mut Incoming, text: &str, path: &dyn Fn() -> String) -> Result<()> {
        match self {
            Format::Chat | Format::Anthropic | Format::Responses => {
                let value: serde_json::Value =
                    serde_json::from_str(text).map_err(|e| Error::message(path(), format!("not valid JSON: {e}")))?;
                numbers_within_limits(&value, &path())?;
                let (start, mut e) = incoming.encoder();
                crate::core::value::encode_json(&mut e, &value);
                incoming.finish(start, path)
            }
        }
    }
}

/// One step of a pipeline.
#[derive(Debug, Clone)]
pub enum Step {
    Sanitize,
    TrimToTokens(Budget),
    Truncate(Cuts),
    Filter(Conditions),
    Clear {
        keep_system: bool,
    },
    /// Record the token count of the conversation as it is at this point (reply priming included).
    CountTokens(Encoding),
    /// Clear old tool results (`core/edits.rs`); removes no message.
    ClearToolUses(ClearToolUses),
}

/// The steps that remove messages, in the order of [`Totals::removed`].
pub const REMOVING_STEPS: [&str; 5] = ["sanitize", "trim_to_tokens", "truncate", "filter", "clear"];

impl Step {
    /// Position in [`REMOVING_STEPS`] (none for `CountTokens`).
    fn removing(&self) -> Option<usize> {
        match self {
            Step::Sanitize => Some(0),
            Step::TrimToTokens(_) => Some(1),
            Step::Truncate(_) => Some(2),
            Step::Filter(_) => Some(3),
            Step::Clear { .. } => Some(4),
            Step::CountTokens(_) | Step::ClearToolUses(_) => None,
        }
    }
}

/// A kept message: the input message at this position, or a new one (a message cut to fit by
/// `trim_to_tokens(allow_partial=True)`), as its encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    Input(usize),
    New(Vec<u8>),
}

/// What the pipeline did to one conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub kept: Vec<Kept>,
    pub messages_in: usize,
    /// Messages removed by each of [`REMOVING_STEPS`].
    pub removed: [u64; REMOVING_STEPS.len()],
    /// The count of each `CountTokens` step, in step order.
    pub tokens: Vec<u64>,
    /// What the `ClearToolUses` steps cleared: tool uses, and tokens (exact).
    pub cleared_tool_uses: u64,
    pub cleared_input_tokens: u64,
}

/// Totals over many conversations. Every record read is a conversation, a bad record or a blank
/// line: `records == conversations + bad + blank` once a run has written what it read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Records read: JSONL lines (blank ones included), or the items given.
    pub records: u64,
    /// Blank lines, skipped.
    pub blank: u64,
    /// Conversations processed (bad records not included).
    pub conversations: u64,
    /// Records that could not be processed (written to the errors file).
    pub bad: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    pub removed: [u64; REMOVING_STEPS.len()],
    /// The sum of each `CountTokens` step's counts, in step order.
    pub tokens: Vec<u64>,
    pub cleared_tool_uses: u64,
    pub cleared_input_tokens: u64,
    /// Input bytes read.
    pub bytes_in: u64,
    /// Output bytes written.
    pub bytes_out: u64,
}

impl Totals {
    pub fn add(&mut self, outcome: &Outcome) {
        self.conversations += 1;
        self.messages_in += outcome.messages_in as u64;
        self.messages_out += outcome.kept.len() as u64;
        for (total, n) in self.removed.iter_mut().zip(outcome.removed) {
            *total += n;
        }
        if self.tokens.len() < outcome.tokens.len() {
            self.tokens.resize(outcome.tokens.len(), 0);
        }
        for (total, n) in self.tokens.iter_mut().zip(&outcome.tokens) {
            *total += n;
        }
        self.cleared_tool_uses += outcome.cleared_tool_uses;
        self.cleared_input_tokens += outcome.cleared_input_tokens;
    }

    pub fn merge(&mut self, other: &Totals) {
        self.records += other.records;
        self.blank += other.blank;
        self.conversations += other.conversations;
        self.bad += other.bad;
        self.messages_in += other.messages_in;
        self.messages_out += other.messages_out;
        for (total, n) in self.removed.iter_mut().zip(other.removed) {
            *total += n;
        }
        if self.tokens.len() < other.tokens.len() {
            self.tokens.resize(other.tokens.len(), 0);
        }
        for (total, n) in self.tokens.iter_mut().zip(&other.tokens) {
            *total += n;
        }
        self.cleared_tool_uses += other.cleared_tool_uses;
        self.cleared_input_tokens += other.cleared_input_tokens;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
    }
}

/// The steps to apply to every conversation, and the format its messages are in.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub steps: Vec<Step>,
    pub format: Format,
}

impl Pipeline {
    /// A pipeline; a truncate without any cut is refused here, once, not per conversation.
    pub fn new(steps: Vec<Step>, format: Format) -> Result<Self> {
        if steps
            .iter()
            .any(|s| matches!(s, Step::Truncate(cuts) if cuts.is_empty()))
        {
            return Err(Error::InvalidOperation(
                "truncate: give at least one of keep_first, keep_last, remove_first, remove_last, range, role".into(),
            ));
        }
        Ok(Self { steps, format })
    }

    /// Apply the steps to one conversation of checked messages. O(conversation), one thread.
    pub fn apply(&self, incoming: Incoming) -> Outcome {
        let n = incoming.len();
        let mut store = Store::of(incoming);
        let mut outcome = Outcome {
            messages_in: n,
            ..Outcome::default()
        };
        for step in &self.steps {
            let before = store.len();
            match step {
                Step::Sanitize => {
                    store.sanitize_once(String::new());
                }
                Step::TrimToTokens(budget) => store.trim_to_tokens_lazily(budget, String::new()),
                Step::Truncate(cuts) => {
                    // Cannot fail: `Pipeline::new` refused a truncate without cuts.
                    let _ = store.truncate(cuts, String::new());
                }
                Step::Filter(conditions) => store.filter(conditions, String::new()),
                Step::Clear { keep_system } => store.clear(*keep_system, String::new()),
                Step::CountTokens(encoding) => outcome.tokens.push(store.token_count(*encoding)),
                Step::ClearToolUses(edit) => {
                    let plan = store.clear_tool_uses(edit, String::new());
                    outcome.cleared_tool_uses += plan.cleared_tool_uses as u64;
                    outcome.cleared_input_tokens += plan.cleared_input_tokens;
                }
            }
            if let Some(k) = step.removing() {
                outcome.removed[k] += before.saturating_sub(store.len()) as u64;
            }
        }
        outcome.kept = store
            .visible()
            .iter()
            .map(|&id| {
                let id = id as usize;
                if id < n {
                    Kept::Input(id)
                } else {
                    Kept::New(store.arena().bytes(id as u32).to_vec())
                }
            })
            .collect();
        store.recycle();
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::roles::Role;

    fn incoming(messages: &[&str]) -> Incoming {
        let mut incoming = Incoming::default();
        for (i, m) in messages.iter().enumerate() {
            Format::Chat
                .add_json(&mut incoming, m, &|| format!("messages[{i}]"))
                .unwrap();
        }
        incoming
    }

    const CALL: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}"#;

    #[test]
    fn sanitize_then_filter_keeps_positions_and_counts_removals() {
        let conversation = incoming(&[
            r#"{"role":"system","content":"s"}"#,
            r#"{"role":"user","content":"hello"}"#,
            CALL,
            r#"{"role":"user","content":"broken group"}"#,
            r#"{"role":"assistant","content":"bye"}"#,
        ]);
        let pipeline = Pipeline::new(
            vec![
                Step::Sanitize,
                Step::Filter(Conditions {
                    roles: vec![Role::User, Role::Assistant],
                    ..Conditions::default()
                }),
                Step::CountTokens(Encoding::Approximate),
            ],
            Format::Chat,
        )
        .unwrap();
        let outcome = pipeline.apply(conversation);
        assert_eq!(outcome.kept, [Kept::Input(1), Kept::Input(3), Kept::Input(4)]);
        assert_eq!(outcome.removed, [1, 0, 0, 1, 0]);
        assert_eq!(outcome.tokens.len(), 1);
    }

    #[test]
    fn trim_keeps_the_newest_that_fit_and_never_splits_a_group() {
        let conversation = incoming(&[
            r#"{"role":"user","content":"one two three four five six seven eight"}"#,
            r#"{"role":"user","content":"q"}"#,
            CALL,
            r#"{"role":"tool","tool_call_id":"a","content":"r"}"#,
            r#"{"role":"user","content":"last"}"#,
        ]);
        let budget = Budget::defaults(30, Encoding::O200kBase);
        let pipeline = Pipeline::new(
            vec![Step::TrimToTokens(budget), Step::CountTokens(Encoding::O200kBase)],
            Format::Chat,
        )
        .unwrap();
        let outcome = pipeline.apply(conversation);
        assert_eq!(
            outcome.kept,
            [Kept::Input(1), Kept::Input(2), Kept::Input(3), Kept::Input(4)]
        );
        assert!(outcome.tokens[0] <= 30);
    }

    #[test]
    fn trim_drops_the_thinking_of_earlier_turns_as_the_array_does() {
        // The reasoning item before the last user turn costs nothing (docs/tokens.md): the
        // history is 59 tokens as sent, under 60, and is kept whole, as `MessageArray` keeps it.
        let conversation = [
            r#"{"role":"system","content":"You are terse."}"#,
            r#"{"role":"user","content":"hi"}"#,
            r#"{"type":"function_call","call_id":"call_a","name":"search","arguments":"{\"q\": \"call_a\"}"}"#,
            r#"{"type":"function_call_output","call_id":"call_a","output":"result of call_a"}"#,
            r#"{"type":"reasoning","id":"rs_call_a","summary":[]}"#,
            r#"{"type":"function_call","call_id":"call_a","name":"search","arguments":"{\"q\": \"call_a\"}"}"#,
            r#"{"type":"function_call_output","call_id":"call_a","output":"result of call_a"}"#,
            r#"{"role":"user","content":"hi"}"#,
        ];
        let encoding = Encoding::O200kBase;
        let budget = Budget::defaults(60, encoding);
        let steps = vec![Step::TrimToTokens(budget), Step::CountTokens(encoding)];
        let outcome = Pipeline::new(steps, Format::Responses)
            .unwrap()
            .apply(incoming(&conversation));
        let mut array = Store::of(incoming(&conversation));
        array.trim_to_tokens(&budget, String::new());
        assert_eq!(outcome.kept.len(), conversation.len());
        assert_eq!(outcome.kept.len(), array.len());
        assert_eq!(outcome.tokens, [array.token_count(encoding)]);
        assert!(outcome.tokens[0] <= 60);
    }

    #[test]
    fn a_truncate_without_cuts_is_refused_once() {
        assert!(Pipeline::new(vec![Step::Truncate(Cuts::default())], Format::Chat).is_err());
        assert_eq!(Format::parse("responses").unwrap(), Format::Responses);
        assert!(Format::parse("gemini").is_err());
    }
}
