//! The rules a message must satisfy to be stored (see `docs/message-array.md`), checked on its
//! encoding, and the facts the store keeps beside it.

use crate::core::roles::Role;
use crate::core::value::{Value, ValueRef};

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

/// Timestamps above this are taken as milliseconds (what `Date.now()` produces).
const MILLISECONDS_ABOVE: f64 = 1e11;

/// Check one encoded message.
pub fn check(message: ValueRef<'_>) -> Result<Accepted, Broken> {
    let Some(fields) = message.as_dict() else {
        return Err(broken("", format!("a message must be a dict, got {}", kind(message))));
    };
    let mut role = None;
    let mut content = None;
    let mut tool_calls = None;
    let mut tool_call_id = None;
    let mut timestamp = None;
    for (key, value) in fields.entries() {
        match key {
            "role" => role = Some(value),
            "content" => content = Some(value),
            "tool_calls" => tool_calls = Some(value),
            "tool_call_id" => tool_call_id = Some(value),
            "timestamp" => timestamp = Some(value),
            _ => {}
        }
    }
    let role = match role {
        None => return Err(broken(".role", "missing: every message needs a role")),
        Some(v) => match v.as_str() {
            None => return Err(broken(".role", format!("must be a str, got {}", kind(v)))),
            Some(s) => Role::parse(s).ok_or_else(|| {
                broken(
                    ".role",
                    format!("unknown role {s:?}: expected system, developer, user, assistant or tool"),
                )
            })?,
        },
    };
    let has_calls = match tool_calls {
        None => false,
        Some(v) => check_tool_calls(v)?,
    };
    match content {
        None => {
            return Err(broken(
                ".content",
                "missing: every message needs content (None only on an assistant message with tool_calls)",
            ));
        }
        Some(v) => match v.get() {
            Value::Str(_) | Value::List(_) => {}
            Value::Null if role == Role::Assistant && has_calls => {}
            Value::Null => {
                return Err(broken(
                    ".content",
                    "is None, which only an assistant message with tool_calls may have",
                ));
            }
            _ => {
                return Err(broken(
                    ".content",
                    format!("must be a str, a list of blocks or None, got {}", kind(v)),
                ));
            }
        },
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
    let timestamp = timestamp.and_then(|v| match v.get() {
        Value::Int(i) => Some(i as f64),
        Value::Float(f) => Some(f),
        Value::BigInt(s) => s.parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    });
    let timestamp = timestamp.map(|t| if t > MILLISECONDS_ABOVE { t / 1000.0 } else { t });
    Ok(Accepted { role, timestamp })
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
        for key in ["id", "type"] {
            require_str(fields.field(key), &place, key)?;
        }
        let function_place = || format!("{}.function", place());
        let Some(function) = fields.field("function") else {
            return Err(broken(function_place(), "missing"));
        };
        let Some(function) = function.as_dict() else {
            return Err(broken(
                function_place(),
                format!("must be a dict, got {}", kind(function)),
            ));
        };
        for key in ["name", "arguments"] {
            require_str(function.field(key), &function_place, key)?;
        }
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
