//! The text of a message: the one rule that FILTER matches, the page search indexes, the
//! summarizer starts from and `memci inspect` shows (see `docs/message-array.md`, "Text").
//!
//! A message's text is made of *pieces*, in order:
//! - what it says ([`Piece::Said`]): a string `content`; for a list of blocks, each string block,
//!   each block's string `text` (`text`, `input_text`, `output_text` blocks alike) and a
//!   `tool_result` block's `content` (a string, or blocks read by the same rule); the `output`
//!   of a Responses `function_call_output` item (a string, or a list of parts read like blocks);
//! - the tools it calls ([`Piece::Call`]): an Anthropic `tool_use` block (its `name`, and its
//!   `input`), each OpenAI chat `tool_calls` entry (its `function`'s `name` and `arguments`),
//!   and a Responses `function_call` item (its `name` and `arguments`).
//!
//! The *searchable text* ([`message_text`]) is every piece's strings verbatim, joined by `"\n"`:
//! a said piece, then for a call its name and its arguments (the arguments string as is; of a
//! `tool_use` input, the strings inside it). Every string of it is a string stored verbatim in the
//! message's encoding, so a keyword without `"\n"` found in the text is found in the bytes too
//! (FILTER's fast path relies on it). The *entry text* ([`said_text`], [`calls_text`]) is what
//! a summary of the message starts from: what it says, and its calls as `name(arguments)`.

use crate::core::value::{Value, ValueRef, write_python_json};

/// The arguments of a tool call: a JSON string (OpenAI), or a value (an Anthropic `input`).
#[derive(Clone, Copy, Debug)]
pub enum Arguments<'a> {
    Json(&'a str),
    Value(ValueRef<'a>),
}

/// One piece of a message's text.
#[derive(Clone, Copy, Debug)]
pub enum Piece<'a> {
    /// Text the message says.
    Said(&'a str),
    /// A tool call it makes.
    Call {
        name: &'a str,
        arguments: Option<Arguments<'a>>,
    },
}

/// Calls `f` with each piece of `message`'s text, in order (the rule in the module's docs).
pub fn for_each_piece<'a>(message: ValueRef<'a>, f: &mut impl FnMut(Piece<'a>)) {
    if let Some(content) = message.field("content") {
        content_pieces(content, f);
    }
    if let Some(calls) = message.field("tool_calls").and_then(ValueRef::as_list) {
        for call in calls.values() {
            if let Some(function) = call.field("function") {
                call_piece(function, f);
            }
        }
    }
    match message.field("type").and_then(ValueRef::as_str) {
        Some("function_call") => call_piece(message, f),
        Some("function_call_output") => {
            if let Some(output) = message.field("output") {
                content_pieces(output, f);
            }
        }
        _ => {}
    }
}

/// A call whose `name` and `arguments` are fields of `holder`; a call with no string name has
/// an empty one.
fn call_piece<'a>(holder: ValueRef<'a>, f: &mut impl FnMut(Piece<'a>)) {
    let name = holder.field("name").and_then(ValueRef::as_str).unwrap_or("");
    let arguments = holder
        .field("arguments")
        .and_then(ValueRef::as_str)
        .map(Arguments::Json);
    f(Piece::Call { name, arguments });
}

fn content_pieces<'a>(content: ValueRef<'a>, f: &mut impl FnMut(Piece<'a>)) {
    match content.get() {
        Value::Str(s) => f(Piece::Said(s)),
        Value::List(blocks) => {
            for block in blocks.values() {
                block_pieces(block, f);
            }
        }
        _ => {}
    }
}

fn block_pieces<'a>(block: ValueRef<'a>, f: &mut impl FnMut(Piece<'a>)) {
    match block.get() {
        Value::Str(s) => f(Piece::Said(s)),
        Value::Dict(items) => {
            if let Some(text) = items.field("text").and_then(ValueRef::as_str) {
                f(Piece::Said(text));
            }
            match items.field("type").and_then(ValueRef::as_str) {
                Some("tool_result") => {
                    if let Some(inner) = items.field("content") {
                        content_pieces(inner, f);
                    }
                }
                Some("tool_use") => f(Piece::Call {
                    name: items.field("name").and_then(ValueRef::as_str).unwrap_or(""),
                    arguments: items.field("input").map(Arguments::Value),
                }),
                _ => {}
            }
        }
        _ => {}
    }
}

/// The strings inside a value, in order (dict values, not keys).
fn string_leaves<'a>(value: ValueRef<'a>, f: &mut impl FnMut(&'a str)) {
    match value.get() {
        Value::Str(s) => f(s),
        Value::List(items) => items.values().for_each(|v| string_leaves(v, f)),
        Value::Dict(items) => items.entries().for_each(|(_, v)| string_leaves(v, f)),
        _ => {}
    }
}

/// Joins strings by `"\n"`, borrowing the only one when there is one.
struct Joined<'a, 'b> {
    first: Option<&'a str>,
    buf: &'b mut String,
    count: usize,
}

impl<'a, 'b> Joined<'a, 'b> {
    fn new(buf: &'b mut String) -> Self {
        buf.clear();
        Self {
            first: None,
            buf,
            count: 0,
        }
    }

    fn push(&mut self, s: &'a str) {
        match self.count {
            0 => self.first = Some(s),
            1 => {
                self.buf.push_str(self.first.unwrap_or(""));
                self.buf.push('\n');
                self.buf.push_str(s);
            }
            _ => {
                self.buf.push('\n');
                self.buf.push_str(s);
            }
        }
        self.count += 1;
    }

    fn finish(self) -> &'b str
    where
        'a: 'b,
    {
        if self.count == 1 {
            self.first.unwrap_or("")
        } else {
            self.buf
        }
    }
}

/// The searchable text of `message` (see the module's docs), in `buf` unless it is one string
/// of the message, which is borrowed. O(size of the message).
pub fn message_text<'a>(message: ValueRef<'a>, buf: &'a mut String) -> &'a str {
    let mut out = Joined::new(buf);
    for_each_piece(message, &mut |piece| match piece {
        Piece::Said(s) => out.push(s),
        Piece::Call { name, arguments } => {
            out.push(name);
            match arguments {
                Some(Arguments::Json(s)) => out.push(s),
                Some(Arguments::Value(v)) => string_leaves(v, &mut |s| out.push(s)),
                None => {}
            }
        }
    });
    out.finish()
}

/// What `message` says: its [`Piece::Said`] pieces joined by `"\n"`.
pub fn said_text<'a>(message: ValueRef<'a>, buf: &'a mut String) -> &'a str {
    let mut out = Joined::new(buf);
    for_each_piece(message, &mut |piece| {
        if let Piece::Said(s) = piece {
            out.push(s);
        }
    });
    out.finish()
}

/// The tools `message` calls, as `name(arguments)` joined by `"; "`: an arguments string as is,
/// a `tool_use` input as JSON the way Python's `json.dumps(input, ensure_ascii=False)` writes it.
pub fn calls_text(message: ValueRef<'_>) -> String {
    let mut out = String::new();
    for_each_piece(message, &mut |piece| {
        if let Piece::Call { name, arguments } = piece {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str(name);
            out.push('(');
            match arguments {
                Some(Arguments::Json(s)) => out.push_str(s),
                Some(Arguments::Value(v)) => write_python_json(&mut out, v),
                None => {}
            }
            out.push(')');
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::value::{Encoder, encode_json};

    fn encoded(json: &str) -> Vec<u8> {
        let parsed: serde_json::Value = serde_json::from_str(json).unwrap();
        let mut bytes = Vec::new();
        encode_json(&mut Encoder::new(&mut bytes), &parsed);
        bytes
    }

    fn text_of(json: &str) -> (String, String, String) {
        let bytes = encoded(json);
        let (mut a, mut b) = (String::new(), String::new());
        let m = ValueRef::new(&bytes);
        let searchable = message_text(m, &mut a).to_owned();
        let said = said_text(m, &mut b).to_owned();
        (searchable, said, calls_text(m))
    }

    #[test]
    fn blocks_give_their_text_tool_results_and_tool_use_calls() {
        let (searchable, said, calls) = text_of(
            r#"{"role": "assistant", "content": [{"type": "text", "text": "alpha"}, "plain",
                {"type": "tool_result", "content": [{"type": "text", "text": "beta"}]},
                {"type": "tool_use", "name": "look", "input": {"q": "gamma", "n": 2, "tags": ["delta"]}}]}"#,
        );
        assert_eq!(searchable, "alpha\nplain\nbeta\nlook\ngamma\ndelta");
        assert_eq!(said, "alpha\nplain\nbeta");
        assert_eq!(calls, r#"look({"q": "gamma", "n": 2, "tags": ["delta"]})"#);
    }

    #[test]
    fn openai_tool_calls_give_their_names_and_arguments() {
        let (searchable, said, calls) = text_of(
            r#"{"role": "assistant", "content": "let me see", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}"#,
        );
        assert_eq!(searchable, "let me see\nget_weather\n{\"city\":\"Paris\"}\nnow\n{}");
        assert_eq!(said, "let me see");
        assert_eq!(calls, r#"get_weather({"city":"Paris"}); now({})"#);
    }

    #[test]
    fn responses_items_give_their_text_calls_and_outputs() {
        let (searchable, ..) =
            text_of(r#"{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}"#);
        assert_eq!(searchable, "hi");
        let (searchable, said, calls) =
            text_of(r#"{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{\"a\": 1}"}"#);
        assert_eq!((searchable.as_str(), said.as_str()), ("f\n{\"a\": 1}", ""));
        assert_eq!(calls, r#"f({"a": 1})"#);
        let (searchable, ..) = text_of(r#"{"type": "function_call_output", "call_id": "c", "output": "42"}"#);
        assert_eq!(searchable, "42");
        let (searchable, ..) = text_of(
            r#"{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}"#,
        );
        assert_eq!(searchable, "a\nb");
    }

    #[test]
    fn a_single_string_is_borrowed_and_odd_shapes_give_nothing() {
        let bytes = encoded(r#"{"role": "user", "content": "only"}"#);
        let mut buf = String::new();
        let text = message_text(ValueRef::new(&bytes), &mut buf);
        assert_eq!(text, "only");
        assert!(buf.is_empty(), "one piece is not copied");
        assert_eq!(text_of(r#"{"role": "user", "content": 5, "tool_calls": [3]}"#).0, "");
        assert_eq!(text_of("[1, 2]").0, "");
    }
}
