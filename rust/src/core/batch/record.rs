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

    /// The record as the pipeline left it, as pieces in order: spans of the record's own text
    /// (the text around the messages list, each run of kept messages that stood next to each
    /// other, with the separators between them as they were) and new bytes (a `,` where dropped
    /// messages are closed over, a new message as compact JSON). A record nothing was dropped
    /// from or added to is one span: the whole text, byte for byte. O(pieces).
    pub fn pieces(&self, outcome: &Outcome, emit: &mut dyn FnMut(Piece<'_>)) {
        let unchanged = outcome.kept.len() == self.messages.len()
            && outcome.kept.iter().enumerate().all(|(i, k)| *k == Kept::Input(i));
        if unchanged {
            return emit(Piece::Text(0..self.text.len()));
        }
        let mut out = Joined { pending: 0..0, emit };
        // `[` and `]` are the list's first and last bytes.
        out.text(0..self.list.start + 1);
        let mut scratch = String::new();
        let mut kept = outcome.kept.iter().peekable();
        let mut first = true;
        while let Some(k) = kept.next() {
            if !std::mem::take(&mut first) {
                out.bytes(b",");
            }
            match k {
                Kept::Input(i) => {
                    let mut last = *i;
                    while let Some(Kept::Input(next)) = kept.peek()
                        && *next == last + 1
                    {
                        last = *next;
                        kept.next();
                    }
                    out.text(self.messages[*i].start..self.messages[last].end);
                }
                Kept::New(bytes) => {
                    scratch.clear();
                    write_value(&mut scratch, ValueRef::new(bytes));
                    out.bytes(scratch.as_bytes());
                }
            }
        }
        out.text(self.list.end - 1..self.text.len());
        out.flush();
    }

    /// Append the record as the pipeline left it to `out` ([`Record::pieces`], copied).
    pub fn write(&self, outcome: &Outcome, out: &mut Vec<u8>) {
        self.pieces(outcome, &mut |piece| match piece {
            Piece::Text(span) => out.extend_from_slice(&self.text.as_bytes()[span]),
            Piece::Bytes(bytes) => out.extend_from_slice(bytes),
        });
    }
}

/// Pieces on their way out: a span is held back until the next piece, so that spans that meet
/// go out as one.
struct Joined<'e> {
    pending: Range<usize>,
    emit: &'e mut dyn FnMut(Piece<'_>),
}

impl Joined<'_> {
    fn text(&mut self, span: Range<usize>) {
        if !self.pending.is_empty() && self.pending.end == span.start {
            self.pending.end = span.end;
        } else {
            self.flush();
            self.pending = span;
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.flush();
        (self.emit)(Piece::Bytes(bytes));
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            (self.emit)(Piece::Text(std::mem::take(&mut self.pending)));
        }
    }
}

/// A piece of a record's output: a span of its text, or bytes of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(Range<usize>),
    Bytes(&'a [u8]),
}

/// Run the pipeline on one record's text; its output goes to `emit` as [`Piece`]s, and only once
/// the record is read and checked (a bad record emits nothing).
pub fn process_into(pipeline: &Pipeline, text: &str, emit: &mut dyn FnMut(Piece<'_>)) -> Result<Outcome, Bad> {
    let (record, incoming) = Record::read(text, pipeline)?;
    let outcome = pipeline.apply(incoming);
    record.pieces(&outcome, emit);
    Ok(outcome)
}

/// Run the pipeline on one record's text and append the result to `out` ([`Record::write`]).
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
    fn a_record_nothing_was_dropped_from_is_its_own_text_in_one_piece() {
        let pipeline = Pipeline::new(vec![Step::Sanitize], Format::Chat).unwrap();
        let line =
            r#" { "messages" : [ {"role": "user", "content": "a"} ,  {"role":"assistant","content":"b"} ] , "k": 1 } "#;
        let (record, incoming) = Record::read(line, &pipeline).unwrap();
        let mut pieces = Vec::new();
        record.pieces(&pipeline.apply(incoming), &mut |p| pieces.push(format!("{p:?}")));
        assert_eq!(pieces, [format!("{:?}", Piece::Text(0..line.len()))]);
    }

    #[test]
    fn runs_of_kept_messages_keep_their_separators_and_dropped_ones_are_closed_over_with_a_comma() {
        let (user, answer) = (
            r#"{"role":"user","content":"q"}"#,
            r#"{"role":"assistant","content":"a"}"#,
        );
        let orphan = r#"{"role":"tool","tool_call_id":"x","content":"o"}"#;
        let line = format!("[ {user} ,\t{answer}, {orphan} ,{user}, {answer} ]");
        assert_eq!(run(&line).unwrap(), format!("[{user} ,\t{answer},{user}, {answer}]"));
        let line = format!("[{orphan}, {user}, {orphan}]");
        assert_eq!(run(&line).unwrap(), format!("[{user}]"));
        let line = format!(r#"{{"messages": [{orphan}], "n": 1}}"#);
        assert_eq!(run(&line).unwrap(), r#"{"messages": [], "n": 1}"#);
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
