//! The whole store as JSON, and back: every stored message with its timestamp, the visible
//! order, every batch snapshot, marks and the tool description. Floats are written so they read
//! back bit for bit, and stay floats (`1.0`, never `1`); integers of any size stay integers.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value as Json};

use crate::core::arena::{Arena, NodeId};
use crate::core::cow_vec::CowVec;
use crate::core::error::{Error, Result};
use crate::core::message;
use crate::core::snapshot::{History, Snapshot, View};
use crate::core::store::Store;
use crate::core::value::{
    Encoder, MAX_VALUE_BYTES, encode_json, read_within, write_json_str as write_str, write_value,
};

const FORMAT: &str = "memci.MessageStore";
const VERSION: u64 = 1;

fn write_ids<'a>(out: &mut String, ids: impl Iterator<Item = &'a NodeId>) {
    out.push('[');
    for (i, id) in ids.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{id}");
    }
    out.push(']');
}

fn write_f64(out: &mut String, f: f64) {
    out.push_str(&Json::from(f).to_string());
}

impl Store {
    /// The whole state as JSON text. O(total size).
    pub fn to_json(&self) -> String {
        let arena = &self.arena;
        let mut out = String::with_capacity(arena.heap_bytes() / 2 + 64);
        let _ = write!(out, "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"messages\":[");
        for id in 0..arena.len() as NodeId {
            if id > 0 {
                out.push(',');
            }
            write_value(&mut out, arena.message(id));
        }
        out.push_str("],\"timestamps\":[");
        for id in 0..arena.len() as NodeId {
            if id > 0 {
                out.push(',');
            }
            write_f64(&mut out, arena.timestamp(id));
        }
        out.push_str("],\"visible\":");
        write_ids(&mut out, self.view.visible.iter());
        out.push_str(",\"batches\":[");
        for (i, s) in self.history.ended.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"visible\":");
            write_ids(&mut out, s.view.visible.iter());
            out.push_str(",\"timestamp\":");
            write_f64(&mut out, s.timestamp);
            out.push_str(",\"description\":");
            write_str(&mut out, &s.description);
            out.push('}');
        }
        out.push_str("],\"marks\":{");
        for (i, (tag, ids)) in self.marks.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(&mut out, tag);
            out.push(':');
            let mut sorted: Vec<NodeId> = ids.iter().copied().collect();
            sorted.sort_unstable();
            write_ids(&mut out, sorted.iter());
        }
        out.push_str("},\"tool_description\":");
        match self.tool_description {
            Some(id) => {
                let _ = write!(out, "{id}");
            }
            None => out.push_str("null"),
        }
        out.push('}');
        out
    }

    /// Load a state written by [`Store::to_json`]. Every part is checked; a bad one raises
    /// [`Error::State`] (or [`Error::InvalidMessage`] for a bad message) naming it.
    pub fn from_json(text: &str) -> Result<Store> {
        let root: Json = serde_json::from_str(text).map_err(|e| state(format!("not valid JSON: {e}")))?;
        let root = root
            .as_object()
            .ok_or_else(|| state("the state must be a JSON object"))?;
        if root.get("format").and_then(Json::as_str) != Some(FORMAT) {
            return Err(state(format!("\"format\" must be {FORMAT:?}")));
        }
        if root.get("version").and_then(Json::as_u64) != Some(VERSION) {
            return Err(state(format!("\"version\" must be {VERSION}")));
        }
        let messages = array(root, "messages")?;
        let timestamps = array(root, "timestamps")?;
        if timestamps.len() != messages.len() {
            return Err(state("\"timestamps\" must have one entry per message"));
        }
        let mut arena = Arena::default();
        let mut buf = Vec::new();
        for (i, (m, t)) in messages.iter().zip(timestamps).enumerate() {
            numbers_within_limits(m, &format!("messages[{i}]"))?;
            buf.clear();
            encode_json(&mut Encoder::new(&mut buf), m);
            let message = read_within(&buf, MAX_VALUE_BYTES)
                .map_err(|reason| Error::message(format!("messages[{i}]"), reason))?;
            let facts =
                message::check(message).map_err(|b| Error::message(format!("messages[{i}]{}", b.place), b.reason))?;
            let t = t
                .as_f64()
                .ok_or_else(|| state(format!("timestamps[{i}] must be a number")))?;
            arena.push(&buf, facts.role, t);
        }
        let n = arena.len();
        let view = View::of(ids(root.get("visible"), n, "visible")?);
        let mut history = History::default();
        for (i, b) in array(root, "batches")?.iter().enumerate() {
            let where_ = format!("batches[{i}]");
            let b = b
                .as_object()
                .ok_or_else(|| state(format!("{where_} must be an object")))?;
            let visible = ids(b.get("visible"), n, &format!("{where_}.visible"))?;
            let timestamp = b
                .get("timestamp")
                .and_then(Json::as_f64)
                .ok_or_else(|| state(format!("{where_}.timestamp must be a number")))?;
            let description = b
                .get("description")
                .and_then(Json::as_str)
                .ok_or_else(|| state(format!("{where_}.description must be a string")))?
                .to_owned();
            history.ended.push(Snapshot {
                view: View::of(visible),
                timestamp,
                description,
            });
        }
        let mut marks = BTreeMap::new();
        let mark_map: &Map<String, Json> = root
            .get("marks")
            .and_then(Json::as_object)
            .ok_or_else(|| state("\"marks\" must be an object"))?;
        for (tag, list) in mark_map {
            let set: HashSet<NodeId> = ids(Some(list), n, &format!("marks[{tag:?}]"))?
                .iter()
                .copied()
                .collect();
            marks.insert(tag.clone(), set);
        }
        let tool_description = match root.get("tool_description") {
            None | Some(Json::Null) => None,
            Some(v) => Some(id(v, n, "tool_description")?),
        };
        Ok(Store {
            arena,
            view,
            history,
            marks,
            tool_description,
            ..Store::default()
        })
    }
}

/// Python refuses to read or print an int of more digits than this (`sys.int_info`), so a stored
/// message holding one could never be read back.
pub(crate) const MAX_INT_DIGITS: usize = 4300;

/// The rule `append` applies to numbers, applied to a loaded message: finite floats, and ints Python
/// can read (a state written by hand may hold `1e400`, which would load as infinity).
pub(crate) fn numbers_within_limits(value: &Json, place: &str) -> Result<()> {
    match value {
        Json::Number(n) => {
            let text = n.to_string();
            if text.contains(['.', 'e', 'E']) {
                if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                    return Err(Error::message(place, format!("{text} is not a finite float")));
                }
            } else if text.trim_start_matches('-').len() > MAX_INT_DIGITS {
                return Err(Error::message(
                    place,
                    format!("an integer of {} digits is more than Python reads", text.len()),
                ));
            }
            Ok(())
        }
        Json::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| numbers_within_limits(v, &format!("{place}[{i}]"))),
        Json::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| numbers_within_limits(v, &format!("{place}.{k}"))),
        _ => Ok(()),
    }
}

fn state(m: impl Into<String>) -> Error {
    Error::State(format!("from_json: {}", m.into()))
}

fn array<'a>(root: &'a Map<String, Json>, key: &str) -> Result<&'a Vec<Json>> {
    root.get(key)
        .and_then(Json::as_array)
        .ok_or_else(|| state(format!("{key:?} must be an array")))
}

fn id(v: &Json, n: usize, place: &str) -> Result<NodeId> {
    match v.as_u64() {
        Some(i) if (i as usize) < n => Ok(i as NodeId),
        _ => Err(state(format!(
            "{place}: {v} is not the id of a stored message (0..{n})"
        ))),
    }
}

/// A list of distinct stored-message ids (a message is never shown twice).
fn ids(v: Option<&Json>, n: usize, place: &str) -> Result<CowVec<NodeId>> {
    let list = v
        .and_then(Json::as_array)
        .ok_or_else(|| state(format!("{place} must be an array")))?;
    let mut seen = HashSet::with_capacity(list.len());
    let mut out = CowVec::new();
    for (i, v) in list.iter().enumerate() {
        let id = id(v, n, &format!("{place}[{i}]"))?;
        if !seen.insert(id) {
            return Err(state(format!("{place}[{i}]: message {id} appears twice")));
        }
        out.push_back(id);
    }
    Ok(out)
}
