//! The rules a message must satisfy to be stored (see `docs/message-array.md`), checked on its
//! encoding, and the facts the store keeps beside it.

use crate::core::error::quoted;
use crate::core::roles::Role;
use crate::core::value::{Items, Value, ValueRef, WELL_KNOWN_KEYS};

/// What the store records beside an accepted message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accepted {
    pub role: Role,
    /// The message's own numeric `timestamp` key, in seconds, if it has one.
    pub timestamp: Option<f64>,
}

/// A rule broken: the place inside the message (`.tool_calls[0].function`, empty for the
/// message itself) and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    pub place: String,
    pub reason: String,
}

fn broken(place: impl Into<String>, reason: impl Into<String>) -> Broken {
    Broken {
        place: place.into(),
        reason: reason.into(),
    }
}

fn kind(v: ValueRef<'_>) -> &'static str {
    match v.get() {
        Value::Null => "None",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::BigInt(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::List(_) => "list",
        Value::Dict(_) => "dict",
    }
}

/// Codes of the keys in `WELL_KNOWN_KEYS` that readers of stored messages compare instead of key
/// names (the check on every append, the pair scan).
pub mod key {
    pub const ROLE: usize = 0;
    pub const CONTENT: usize = 1;
    pub const TOOL_CALLS: usize = 2;
    pub const TOOL_CALL_ID: usize = 3;
    pub const TIMESTAMP: usize = 5;
    pub const NAME: usize = 4;
    pub const TYPE: usize = 6;
    pub const ID: usize = 8;
    pub const FUNCTION: usize = 9;
    pub const ARGUMENTS: usize = 10;
    pub const INPUT: usize = 11;
    pub const TOOL_USE_ID: usize = 12;
}

/// Timestamps above this are taken as milliseconds (what `Date.now()` produces).
const MILLISECONDS_ABOVE: f64 = 1e11;

/// Check one encoded message: a chat message (it has a `role`) or a Responses API item (it has a
/// `type` and no `role`; a message item has both and is checked as a chat message).
pub fn check(message: ValueRef<'_>) -> Result<Accepted, Broken> {
    let Some(fields) = message.as_dict() else {
        return Err(broken("", format!("a message must be a dict, got {}", kind(message))));
    };
    let mut role = None;
    let mut content = None;
    let mut tool_calls = None;
    let mut tool_call_id = None;
    let mut timestamp = None;
    let mut item_type = None;
    // An assistant message may leave `content` out when it carries one of these instead.
    let mut instead_of_content = false;
    for (name, value) in fields.keyed_entries() {
        match name.code {
            Some(key::ROLE) => role = Some(value),
            Some(key::CONTENT) => content = Some(value),
            Some(key::TOOL_CALLS) => tool_calls = Some(value),
            Some(key::TOOL_CALL_ID) => tool_call_id = Some(value),
            Some(key::TIMESTAMP) => timestamp = Some(value),
            Some(key::TYPE) => item_type = Some(value),
            Some(_) => {}
            None => match name.name {
                "function_call" | "audio" => instead_of_content |= value.as_dict().is_some(),
                "refusal" => instead_of_content |= value.as_str().is_some(),
                _ => {}
            },
        }
    }
    if let Some(item_type) = item_type
        && item_type.as_str() != Some("message")
    {
        return Ok(Accepted {
            role: check_item(fields, role, item_type)?,
            timestamp: timestamp_of(timestamp),
        });
    }
    let role = match role {
        None if item_type.is_some() => return Err(broken(".role", "missing: a message item needs a role")),
        None => {
            return Err(broken(
                ".role",
                "missing: every message needs a role (a Responses API item needs a type)",
            ));
        }
        Some(v) => parse_role(v)?,
    };
    let has_calls = match tool_calls {
        None => false,
        Some(v) => check_tool_calls(v)?,
    };
    let content_optional = role == Role::Assistant && (has_calls || instead_of_content);
    match content.map(ValueRef::get) {
        None | Some(Value::Null) if content_optional => {}
        None => {
            return Err(broken(
                ".content",
                "missing: every message needs content (an assistant message may leave it out only \
                 when it has tool_calls, function_call, refusal or audio)",
            ));
        }
        Some(Value::Str(_) | Value::List(_)) => {}
        Some(Value::Null) => {
            return Err(broken(
                ".content",
                "is None, which only an assistant message with tool_calls, function_call, refusal or audio may have",
            ));
        }
        Some(_) => {
            let v = content.map_or("None", kind);
            return Err(broken(
                ".content",
                format!("must be a str, a list of blocks or None, got {v}"),
            ));
        }
    }
    if role == Role::Tool {
        match tool_call_id {
            None => {
                return Err(broken(
                    ".tool_call_id",
                    "missing: a tool message must name the call it answers",
                ));
            }
            Some(v) if v.as_str().is_none() => {
                return Err(broken(".tool_call_id", format!("must be a str, got {}", kind(v))));
            }
            Some(_) => {}
        }
    }
    Ok(Accepted {
        role,
        timestamp: timestamp_of(timestamp),
    })
}

fn parse_role(value: ValueRef<'_>) -> Result<Role, Broken> {
    let Some(s) = value.as_str() else {
        return Err(broken(".role", format!("must be a str, got {}", kind(value))));
    };
    Role::parse(s).ok_or_else(|| {
        broken(
            ".role",
            format!(
                "unknown role {}: expected system, developer, user, assistant or tool",
                quoted(s)
            ),
        )
    })
}

/// A message's own numeric `timestamp`, in seconds.
fn timestamp_of(value: Option<ValueRef<'_>>) -> Option<f64> {
    let timestamp = value.and_then(|v| match v.get() {
        Value::Int(i) => Some(i as f64),
        Value::Float(f) => Some(f),
        Value::BigInt(s) => s.parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    });
    timestamp.map(|t| if t > MILLISECONDS_ABOVE { t / 1000.0 } else { t })
}

/// The item types that call a tool the caller runs, answered by an item of the same type with
/// `_output` appended that carries the same `call_id` (the Responses API's `ResponseInputItemParam`).
pub const CALL_TYPES: [&str; 5] = [
    "function_call",
    "custom_tool_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
];

/// Whether an item type calls a tool the caller runs (one of [`CALL_TYPES`]).
pub fn is_call_type(item_type: &str) -> bool {
    CALL_TYPES.contains(&item_type)
}

/// Whether an item type answers one of [`CALL_TYPES`] (`function_call_output`, ...).
pub fn is_output_type(item_type: &str) -> bool {
    item_type.strip_suffix("_output").is_some_and(is_call_type)
}

/// The role an item without one is indexed under: an output (any type ending in `_output`) is
/// `tool`, every other item (calls, reasoning, hosted tool calls, references) `assistant`.
pub fn item_role(item_type: &str) -> Role {
    if item_type.ends_with("_output") {
        Role::Tool
    } else {
        Role::Assistant
    }
}

/// Check a Responses API item (a `type` other than `message`; see `docs/message-array.md`) and
/// give the role it is indexed under: its own `role` if it has one, else [`item_role`]. The
/// fields the API requires of the common types are checked; other types are kept as they are.
fn check_item(fields: Items<'_>, role: Option<ValueRef<'_>>, item_type: ValueRef<'_>) -> Result<Role, Broken> {
    let Some(item_type) = item_type.as_str() else {
        return Err(broken(".type", format!("must be a str, got {}", kind(item_type))));
    };
    let required: &[&str] = match item_type {
        "function_call" => &["call_id", "name", "arguments"],
        "custom_tool_call" => &["call_id", "name", "input"],
        "custom_tool_call_output" => &["call_id"],
        _ => &[],
    };
    for key in required {
        require_str(fields.field(key), &String::new, key)?;
    }
    if matches!(item_type, "function_call_output" | "custom_tool_call_output") {
        let output = fields.field("output");
        match output.map(ValueRef::get) {
            Some(Value::Str(_) | Value::List(_)) => {}
            None => return Err(broken(".output", "missing: a tool call's output needs its output")),
            Some(_) => {
                let got = output.map_or("None", kind);
                return Err(broken(
                    ".output",
                    format!("must be a str or a list of content parts, got {got}"),
                ));
            }
        }
        // `call_id` is optional on a function call's output (`Optional[str]`), a str when given.
        if let Some(id) = fields.field("call_id")
            && !matches!(id.get(), Value::Str(_) | Value::Null)
        {
            return Err(broken(".call_id", format!("must be a str, got {}", kind(id))));
        }
    }
    if item_type == "reasoning" {
        match fields.field("summary") {
            None => return Err(broken(".summary", "missing: a reasoning item needs its summary list")),
            Some(v) if v.as_list().is_none() => {
                return Err(broken(".summary", format!("must be a list, got {}", kind(v))));
            }
            Some(_) => {}
        }
    }
    match role {
        Some(role) => parse_role(role),
        None => Ok(item_role(item_type)),
    }
}

/// `tool_calls` must be None or a list of `{id, type, function: {name, arguments}}`; returns
/// whether it holds any call.
fn check_tool_calls(value: ValueRef<'_>) -> Result<bool, Broken> {
    let calls = match value.get() {
        Value::Null => return Ok(false),
        Value::List(calls) => calls,
        _ => {
            return Err(broken(
                ".tool_calls",
                format!("must be a list or None, got {}", kind(value)),
            ));
        }
    };
    for (i, call) in calls.values().enumerate() {
        // Places are formatted only when something is wrong: this runs for every stored call.
        let place = || format!(".tool_calls[{i}]");
        let Some(fields) = call.as_dict() else {
            return Err(broken(place(), format!("must be a dict, got {}", kind(call))));
        };
        // One pass over the call's keys (the first of each, as `field` finds it).
        let (mut id, mut call_type, mut function, mut custom) = (None, None, None, None);
        for (key, value) in fields.keyed_entries() {
            let slot = match key.code {
                Some(key::ID) => &mut id,
                Some(key::TYPE) => &mut call_type,
                Some(key::FUNCTION) => &mut function,
                None if key.name == "custom" => &mut custom,
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        require_str(id, &place, "id")?;
        require_str(call_type, &place, "type")?;
        // The Chat Completions API's two kinds of tool call: `function` (a JSON `arguments`
        // string) and `custom` (a free-form `input` string).
        let (key, inner, text_key) = if call_type.and_then(ValueRef::as_str) == Some("custom") {
            ("custom", custom, key::INPUT)
        } else {
            ("function", function, key::ARGUMENTS)
        };
        let inner_place = || format!("{}.{key}", place());
        let Some(inner) = inner else {
            return Err(broken(inner_place(), "missing"));
        };
        let Some(inner) = inner.as_dict() else {
            return Err(broken(inner_place(), format!("must be a dict, got {}", kind(inner))));
        };
        let (mut name, mut text) = (None, None);
        for (k, value) in inner.keyed_entries() {
            match k.code {
                Some(key::NAME) => _ = name.get_or_insert(value),
                Some(c) if c == text_key => _ = text.get_or_insert(value),
                _ => {}
            }
        }
        require_str(name, &inner_place, "name")?;
        require_str(text, &inner_place, WELL_KNOWN_KEYS[text_key])?;
    }
    Ok(calls.count > 0)
}

fn require_str(value: Option<ValueRef<'_>>, place: &dyn Fn() -> String, key: &str) -> Result<(), Broken> {
    match value {
        None => Err(broken(format!("{}.{key}", place()), "missing")),
        Some(v) if v.as_str().is_none() => Err(broken(
            format!("{}.{key}", place()),
            format!("must be a str, got {}", kind(v)),
        )),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::value::Encoder;

    /// Encode a flat dict of string (or None) values; `[]` as a value means an empty list.
    fn msg(fields: &[(&str, Option<&str>)]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let d = e.open_dict(fields.len());
        for (k, v) in fields {
            e.key(k);
            match v {
                None => e.null(),
                Some(s) => e.str(s),
            }
        }
        e.close(d);
        buf
    }

    #[test]
    fn accepts_plain_messages_and_reads_the_role() {
        let m = msg(&[("role", Some("user")), ("content", Some("hi"))]);
        assert_eq!(check(ValueRef::new(&m)).unwrap().role, Role::User);
    }

    #[test]
    fn rejections_name_the_field() {
        let cases = [
            (msg(&[("content", Some("hi"))]), ".role"),
            (msg(&[("role", Some("robot")), ("content", Some("hi"))]), ".role"),
            (msg(&[("role", Some("user"))]), ".content"),
            (msg(&[("role", Some("user")), ("content", None)]), ".content"),
            (msg(&[("role", Some("assistant")), ("content", None)]), ".content"),
            (msg(&[("role", Some("tool")), ("content", Some("42"))]), ".tool_call_id"),
            (
                msg(&[
                    ("role", Some("assistant")),
                    ("content", Some("x")),
                    ("tool_calls", Some("no")),
                ]),
                ".tool_calls",
            ),
        ];
        for (m, place) in cases {
            assert_eq!(check(ValueRef::new(&m)).unwrap_err().place, place);
        }
    }

    #[test]
    fn tool_calls_must_be_well_formed() {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let d = e.open_dict(3);
        e.key("role");
        e.str("assistant");
        e.key("content");
        e.null();
        e.key("tool_calls");
        let l = e.open_list(1);
        let c = e.open_dict(3);
        e.key("id");
        e.str("call_1");
        e.key("type");
        e.str("function");
        e.key("function");
        let f = e.open_dict(1);
        e.key("name");
        e.str("search");
        e.close(f);
        e.close(c);
        e.close(l);
        e.close(d);
        let err = check(ValueRef::new(&buf)).unwrap_err();
        assert_eq!(err.place, ".tool_calls[0].function.arguments");
        assert_eq!(err.reason, "missing");
    }

    fn json(text: &str) -> Vec<u8> {
        let mut buf = Vec::new();
        crate::core::value::encode_json(&mut Encoder::new(&mut buf), &serde_json::from_str(text).unwrap());
        buf
    }

    fn place(text: &str) -> Result<Role, String> {
        check(ValueRef::new(&json(text))).map(|f| f.role).map_err(|b| b.place)
    }

    #[test]
    fn responses_items_are_indexed_under_a_role() {
        let cases = [
            (
                r#"{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}"#,
                Role::Assistant,
            ),
            (
                r#"{"type": "function_call_output", "call_id": "c", "output": "42"}"#,
                Role::Tool,
            ),
            (
                r#"{"type": "function_call_output", "output": [{"type": "input_text", "text": "42"}]}"#,
                Role::Tool,
            ),
            (
                r#"{"type": "custom_tool_call", "call_id": "c", "name": "f", "input": "x"}"#,
                Role::Assistant,
            ),
            (r#"{"type": "reasoning", "id": "rs_1", "summary": []}"#, Role::Assistant),
            (
                r#"{"type": "web_search_call", "id": "ws_1", "status": "completed"}"#,
                Role::Assistant,
            ),
            (
                r#"{"type": "additional_tools", "role": "developer", "tools": []}"#,
                Role::Developer,
            ),
            (
                r#"{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}"#,
                Role::User,
            ),
        ];
        for (item, role) in cases {
            assert_eq!(place(item), Ok(role), "{item}");
        }
    }

    #[test]
    fn items_missing_what_the_api_requires_name_the_field() {
        let cases = [
            (
                r#"{"type": "function_call", "call_id": "c", "name": "f"}"#,
                ".arguments",
            ),
            (
                r#"{"type": "function_call", "name": "f", "arguments": "{}"}"#,
                ".call_id",
            ),
            (r#"{"type": "function_call_output", "call_id": "c"}"#, ".output"),
            (
                r#"{"type": "function_call_output", "call_id": 7, "output": "x"}"#,
                ".call_id",
            ),
            (r#"{"type": "custom_tool_call_output", "output": "x"}"#, ".call_id"),
            (r#"{"type": "reasoning", "id": "rs_1"}"#, ".summary"),
            (r#"{"type": "message", "content": "hi"}"#, ".role"),
            (r#"{"type": 3}"#, ".type"),
        ];
        for (item, at) in cases {
            assert_eq!(place(item), Err(at.to_owned()), "{item}");
        }
    }

    #[test]
    fn assistant_content_is_optional_where_the_chat_api_says() {
        let call = r#"[{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]"#;
        for ok in [
            format!(r#"{{"role": "assistant", "tool_calls": {call}}}"#),
            r#"{"role": "assistant", "refusal": "no"}"#.to_owned(),
            r#"{"role": "assistant", "content": null, "audio": {"id": "a"}}"#.to_owned(),
            r#"{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}"#.to_owned(),
            r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "f", "input": "x"}}]}"#.to_owned(),
        ] {
            assert_eq!(place(&ok), Ok(Role::Assistant), "{ok}");
        }
        let cases = [
            (r#"{"role": "assistant"}"#, ".content"),
            (
                r#"{"role": "assistant", "content": null, "refusal": null, "tool_calls": []}"#,
                ".content",
            ),
            (r#"{"role": "user", "refusal": "no"}"#, ".content"),
            (
                r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "f"}}]}"#,
                ".tool_calls[0].custom.input",
            ),
        ];
        for (m, at) in cases {
            assert_eq!(place(m), Err(at.to_owned()), "{m}");
        }
    }

    #[test]
    fn key_codes_name_the_keys_they_stand_for() {
        use crate::core::value::WELL_KNOWN_KEYS as K;
        let codes = [
            key::ROLE,
            key::CONTENT,
            key::TOOL_CALLS,
            key::TOOL_CALL_ID,
            key::TIMESTAMP,
            key::TYPE,
            key::ID,
            key::TOOL_USE_ID,
            key::NAME,
            key::FUNCTION,
            key::ARGUMENTS,
            key::INPUT,
        ];
        let names: Vec<&str> = codes.iter().map(|&c| K[c]).collect();
        assert_eq!(
            names,
            [
                "role",
                "content",
                "tool_calls",
                "tool_call_id",
                "timestamp",
                "type",
                "id",
                "tool_use_id",
                "name",
                "function",
                "arguments",
                "input"
            ]
        );
    }

    #[test]
    fn each_fault_of_a_tool_call_is_named_at_its_place() {
        let with = |calls: &str| format!(r#"{{"role": "assistant", "content": null, "tool_calls": {calls}}}"#);
        let cases = [
            ("[3]", ".tool_calls[0]"),
            (
                r#"[{"type": "function", "function": {"name": "f", "arguments": "{}"}}]"#,
                ".tool_calls[0].id",
            ),
            (
                r#"[{"id": 1, "type": "function", "function": {"name": "f", "arguments": "{}"}}]"#,
                ".tool_calls[0].id",
            ),
            (
                r#"[{"id": "a", "function": {"name": "f", "arguments": "{}"}}]"#,
                ".tool_calls[0].type",
            ),
            (r#"[{"id": "a", "type": "function"}]"#, ".tool_calls[0].function"),
            (
                r#"[{"id": "a", "type": "function", "function": []}]"#,
                ".tool_calls[0].function",
            ),
            (
                r#"[{"id": "a", "type": "function", "function": {"arguments": "{}"}}]"#,
                ".tool_calls[0].function.name",
            ),
            (
                r#"[{"id": "a", "type": "function", "function": {"name": "f", "input": "x"}}]"#,
                ".tool_calls[0].function.arguments",
            ),
            (
                r#"[{"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}]"#,
                ".tool_calls[0].function.arguments",
            ),
            (
                r#"[{"id": "a", "type": "custom", "function": {"name": "f", "arguments": "{}"}}]"#,
                ".tool_calls[0].custom",
            ),
            (
                r#"[{"id": "a", "type": "custom", "custom": {"input": "x"}}]"#,
                ".tool_calls[0].custom.name",
            ),
            (
                r#"[{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}, {"id": "b"}]"#,
                ".tool_calls[1].type",
            ),
        ];
        for (calls, at) in cases {
            assert_eq!(place(&with(calls)), Err(at.to_owned()), "{calls}");
        }
    }

    #[test]
    fn millisecond_timestamps_become_seconds() {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let d = e.open_dict(3);
        e.key("role");
        e.str("user");
        e.key("content");
        e.str("x");
        e.key("timestamp");
        e.int(1_700_000_000_000);
        e.close(d);
        assert_eq!(check(ValueRef::new(&buf)).unwrap().timestamp, Some(1_700_000_000.0));
    }
}
