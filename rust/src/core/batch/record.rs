//! One record of a dataset, as JSON text: a bare list of messages, or an object with a
//! `messages` key whose other keys are kept byte for byte. A record is read into spans of its
//! text (nothing is re-serialised) and written back with only the messages list rebuilt, from
//! the kept messages' own bytes.

use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::core::batch::{Kept, Outcome, Pipeline, parse};
use crate::core::error::Error;
use crate::core::store::Incoming;
use crate::core::value::{ValueRef, write_value};

/// A record that cannot be processed: where (`messages[3].tool_calls[0]`, empty for the record
/// itself) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bad {
    pub path: String,
    pub reason: String,
}

fn bad(path: impl Into<String>, reason: impl Into<String>) -> Bad {
    Bad {
        path: path.into(),
        reason: reason.into(),
    }
}

#[derive(Deserialize)]
struct Object<'a> {
    #[serde(borrow)]
    messages: Option<&'a RawValue>,
}

/// A record read into spans of its text.
#[derive(Debug)]
pub struct Record<'a> {
    text: &'a str,
    /// The span of the messages list in `text`.
    list: Range<usize>,
    /// The span of each message in `text`.
    messages: Vec<Range<usize>>,
    /// How message paths start: `messages` in an object, empty in a bare list.
    prefix: &'static str,
}

fn offset_in(outer: &str, inner: &str) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

fn trimmed(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_ascii_whitespace())
}

impl<'a> Record<'a> {
    /// Read the record in `text` and encode and check its messages, in one pass over its bytes
    /// ([`parse::scan`]) when it can, else by the reference reading ([`Record::parse`], then
    /// [`Record::incoming`]), which then gives the answer and the error.
    pub fn read(text: &'a str, pipeline: &Pipeline) -> Result<(Self, Incoming), Bad> {
        let inner = trimmed(text);
        if let Ok(scanned) = parse::scan(inner) {
            let base = offset_in(text, inner);
            let shift = |r: &Range<usize>| base + r.start..base + r.end;
            let record = Self {
                text,
                list: shift(&scanned.list),
                messages: scanned.messages.iter().map(shift).collect(),
                prefix: scanned.prefix,
            };
            return Ok((record, scanned.incoming));
        }
        let record = Self::parse(text)?;
        let incoming = record.incoming(pipeline)?;
        Ok((record, incoming))
    }

    /// Read the record in `text` (one JSON value; surrounding whitespace allowed) with `serde_json`.
    pub fn parse(text: &'a str) -> Result<Self, Bad> {
        let trimmed = trimmed(text);
        let (list_text, prefix) = match trimmed.as_bytes().first() {
            Some(b'[') => (trimmed, ""),
            Some(b'{') => {
                let object: Object<'a> =
                    serde_json::from_str(trimmed).map_err(|e| bad("", format!("not valid JSON: {e}")))?;
                let raw = object.messages.ok_or_else(|| {
                    bad(
                        "messages",
                        "missing: a record object must have a messages key holding the list of messages",
                    )
                })?;
                (raw.get(), "messages")
            }
            _ => {
                // Not a list or an object: say whether it is JSON at all.
                let reason = match serde_json::from_str::<&RawValue>(trimmed) {
                    Ok(_) => "a record must be a list of messages or an object with a messages key".to_owned(),
                    Err(e) => format!("not valid JSON: {e}"),
                };
                return Err(bad("", reason));
            }
        };
        let messages: Vec<&'a RawValue> = serde_json::from_str(list_text).map_err(|e| {
            if prefix.is_empty() {
                bad("", format!("not valid JSON: {e}"))
            } else {
                bad(prefix, format!("must be a list of messages: {e}"))
            }
        })?;
        let start = offset_in(text, list_text);
        Ok(Self {
            text,
            list: start..start + list_text.len(),
            messages: messages
                .into_iter()
                .map(|m| {
                    let at = offset_in(text, m.get());
                    at..at + m.get().len()
                })
                .collect(),
            prefix,
        })
    }

    /// The text of message `i`.
    fn message(&self, i: usize) -> &'a str {
        &self.text[self.messages[i].clone()]
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Encode and check every message by the pipeline's format.
    pub fn incoming(&self, pipeline: &Pipeline) -> Result<Incoming, Bad> {
        let mut incoming = Incoming::default();
        for i in 0..self.messages.len() {
            pipeline
                .format
                .add_json(&mut incoming, self.message(i), &|| format!("{}[{i}]", self.prefix))
                .map_err(|e| match e {
                    Error::InvalidMessage { path, reason } => bad(path, reason),
                    other => bad(format!("{}[{i}]", self.prefix), other.to_string()),
                })?;
        }
        Ok(incoming)
    }

    /// Append the record as the pipeline left it to `out`: the text around the messages list as
    /// it was, the kept messages' text as it was, a new message as compact JSON.
    pub fn write(&self, outcome: &Outcome, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.text.as_bytes()[..self.list.start]);
        out.push(b'[');
        let mut scratch = String::new();
        for (i, kept) in outcome.kept.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match kept {
                Kept::Input(k) => out.extend_from_slice(self.message(*k).as_bytes()),
                Kept::New(bytes) => {
                    scratch.clear();
                    write_value(&mut scratch, ValueRef::new(bytes));
                    out.extend_from_slice(scratch.as_bytes());
                }
            }
        }
        out.push(b']');
        out.extend_from_slice(&self.text.as_bytes()[self.list.end..]);
    }
}

/// Run the pipeline on one record's text and append the result to `out`.
pub fn process(pipeline: &Pipeline, text: &str, out: &mut Vec<u8>) -> Result<Outcome, Bad> {
    let (record, incoming) = Record::read(text, pipeline)?;
    let outcome = pipeline.apply(incoming);
    record.write(&outcome, out);
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::batch::{Format, Step};

    fn run(text: &str) -> Result<String, Bad> {
        let pipeline = Pipeline::new(vec![Step::Sanitize], Format::Chat).unwrap();
        let mut out = Vec::new();
        process(&pipeline, text, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn kept_messages_and_other_keys_come_out_byte_for_byte() {
        let line = r#"{"id": 7, "messages": [{"content": "hi",  "role": "user", "n": 1.50}, {"role":"tool","tool_call_id":"x","content":"orphan"}], "meta": {"a": [1, 2e3]}}"#;
        assert_eq!(
            run(line).unwrap(),
            r#"{"id": 7, "messages": [{"content": "hi",  "role": "user", "n": 1.50}], "meta": {"a": [1, 2e3]}}"#
        );
        assert_eq!(
            run(r#" [{"role":"user","content":"x"} , {"role":"tool","tool_call_id":"x","content":"o"}] "#).unwrap(),
            r#" [{"role":"user","content":"x"}] "#
        );
    }

    #[test]
    fn bad_records_name_the_place() {
        assert_eq!(run("[{").unwrap_err().path, "");
        assert_eq!(
            run("42").unwrap_err().reason,
            "a record must be a list of messages or an object with a messages key"
        );
        assert_eq!(run(r#"{"id": 1}"#).unwrap_err().path, "messages");
        assert_eq!(run(r#"{"messages": 3}"#).unwrap_err().path, "messages");
        let e = run(r#"{"messages": [{"role":"user","content":"x"}, {"role":"robot","content":"x"}]}"#).unwrap_err();
        assert_eq!(e.path, "messages[1].role");
        let e = run(r#"[{"role":"tool","content":"x"}]"#).unwrap_err();
        assert_eq!(e.path, "[0].tool_call_id");
    }
}
