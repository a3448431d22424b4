//! Turns: which messages of a request belong to earlier turns, and the rule for their thinking
//! (see `docs/tokens.md`, "The thinking of earlier turns").

use crate::core::value::{Value, ValueRef};

/// Whether the thinking of earlier assistant turns counts: `thinking` and `redacted_thinking`
/// blocks, and Responses `reasoning` items, in the messages before the last message that opens a
/// user turn ([`opens_turn`]).
///
/// Anthropic's API strips the thinking blocks of earlier assistant turns from the context window
/// (<https://platform.claude.com/docs/en/build-with-claude/context-windows>, "The context window
/// with extended thinking": `context_window = (input_tokens - previous_thinking_tokens) +
/// current_turn_tokens`); the thinking of the current turn, sent back with its tool results,
/// counts. OpenAI's reasoning models do the same with the Responses API's reasoning items: "any
/// reasoning items from turn 1 are ignored and removed" in turn 2
/// (<https://cookbook.openai.com/examples/responses_api/reasoning_items>).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Thinking {
    /// The providers' default: the thinking of earlier turns costs nothing.
    #[default]
    DropEarlier,
    /// Every thinking block and reasoning item counts, for models that keep them all.
    Count,
}

impl Thinking {
    pub fn parse(name: &str) -> Option<Thinking> {
        match name {
            "drop_earlier" => Some(Thinking::DropEarlier),
            "count" => Some(Thinking::Count),
            _ => None,
        }
    }
}

/// Whether `message` opens a user turn: a user message that is not only tool results (Anthropic
/// sends tool results in user messages; they continue the assistant's turn). Chat `tool`
/// messages and Responses items other than a message never do.
pub fn opens_turn(message: ValueRef<'_>) -> bool {
    let Some(fields) = message.as_dict() else {
        return false;
    };
    if fields
        .field("type")
        .and_then(ValueRef::as_str)
        .is_some_and(|t| t != "message")
        || fields.field("role").and_then(ValueRef::as_str) != Some("user")
    {
        return false;
    }
    match fields.field("content").map(ValueRef::get) {
        // An empty list holds no tool result either: it opens a turn.
        Some(Value::List(blocks)) => {
            let mut values = blocks.values().peekable();
            values.peek().is_none() || values.any(|b| b.field("type").and_then(ValueRef::as_str) != Some("tool_result"))
        }
        _ => true,
    }
}

/// The position of the last of `messages` that opens a user turn (0 when none does):
/// the thinking of the messages before it is earlier turns' thinking.
pub fn current_turn_start<'a>(messages: impl DoubleEndedIterator<Item = ValueRef<'a>> + ExactSizeIterator) -> usize {
    let len = messages.len();
    messages.rev().position(opens_turn).map_or(0, |back| len - 1 - back)
}
