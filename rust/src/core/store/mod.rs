//! The message store: every operation of `memci.MessageArray`, on the arena, the visible view
//! and the batch history. Every operation checks all its arguments before it changes anything,
//! so an error leaves the store exactly as it was.

mod json;
pub(crate) use json::{MAX_INT_DIGITS, numbers_within_limits};
mod edits;
mod sanitize;
mod token_counts;
mod trim;

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::time::{SystemTime, UNIX_EPOCH};

use memchr::memmem::Finder;
use rayon::prelude::*;

use crate::core::arena::{Arena, NodeId};
use crate::core::config::{Conditions, Cuts};
use crate::core::cow_vec::CowVec;
use crate::core::error::{Error, Result};
use crate::core::message::{self, Accepted};
use crate::core::pair_index::PairCache;
use crate::core::roles::Role;
use crate::core::snapshot::{History, View};
use crate::core::text::message_text;
use crate::core::token_counts::TokenCounts;
use crate::core::value::{Encoder, MAX_VALUE_BYTES, read_within};

/// Below this many visible messages a text scan runs on one core (threads cost more than they save).
const PARALLEL_FROM: usize = 8192;
const PARALLEL_CHUNK: usize = 4096;

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Messages encoded and checked, not yet stored. Built outside the store's lock, so a list is
/// accepted or rejected as a whole before the store is touched.
#[derive(Debug)]
pub struct Incoming {
    bytes: Vec<u8>,
    messages: Vec<(Range<usize>, Accepted)>,
}

thread_local! {
    /// The encoding buffer, kept between calls: growing a fresh one cost an append several
    /// reallocations, about a third of its time for a short message.
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Scratch buffers larger than this are not kept.
const SCRATCH_KEEP_BYTES: usize = 1 << 20;

impl Default for Incoming {
    fn default() -> Self {
        Self {
            bytes: SCRATCH.take(),
            messages: Vec::with_capacity(1),
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        recycle_scratch(std::mem::take(&mut self.bytes));
    }
}

/// Keep `bytes` as this thread's encoding buffer, if it is larger than the one kept and not too
/// large to keep.
fn recycle_scratch(mut bytes: Vec<u8>) {
    if bytes.capacity() <= SCRATCH_KEEP_BYTES {
        bytes.clear();
        SCRATCH.with(|kept| {
            let previous = kept.take();
            kept.set(if previous.capacity() >= bytes.capacity() {
                previous
            } else {
                bytes
            });
        });
    }
}

impl Incoming {
    /// An empty list with room for `messages` messages.
    pub fn with_capacity(messages: usize) -> Self {
        let mut incoming = Self::default();
        incoming.messages.reserve(messages);
        incoming
    }

    /// Start the next message: encode it with the returned encoder, then call [`Incoming::finish`].
    pub fn encoder(&mut self) -> (usize, Encoder<'_>) {
        (self.bytes.len(), Encoder::new(&mut self.bytes))
    }

    /// Start the next message by writing its encoding straight into the buffer (for a reader that
    /// encodes as it parses), then call [`Incoming::finish`] with the returned start.
    pub fn buffer(&mut self) -> (usize, &mut Vec<u8>) {
        (self.bytes.len(), &mut self.bytes)
    }

    /// Check the message encoded since `start`; `path` names it in an error (`messages[3]`).
    /// A message over [`MAX_VALUE_BYTES`] encoded (4 GiB - 1) is refused before it is read.
    pub fn finish(&mut self, start: usize, path: impl FnOnce() -> String) -> Result<()> {
        self.finish_within(start, MAX_VALUE_BYTES, path)
    }

    /// [`Incoming::finish`] with the size limit given (tests lower it).
    fn finish_within(&mut self, start: usize, limit: usize, path: impl FnOnce() -> String) -> Result<()> {
        let facts = match read_within(&self.bytes[start..], limit) {
            Err(reason) => return Err(Error::message(path(), reason)),
            Ok(message) => {
                message::check(message).map_err(|b| Error::message(format!("{}{}", path(), b.place), b.reason))?
            }
        };
        self.messages.push((start..self.bytes.len(), facts));
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Each checked message: its encoding and its facts.
    pub fn messages(&self) -> impl Iterator<Item = (&[u8], &Accepted)> {
        self.messages
            .iter()
            .map(|(range, facts)| (&self.bytes[range.clone()], facts))
    }
}

#[derive(Clone, Default, Debug)]
pub struct Store {
    arena: Arena,
    view: View,
    history: History,
    /// Tags on stored messages; they belong to the message, not the batch.
    marks: BTreeMap<String, HashSet<NodeId>>,
    tool_description: Option<NodeId>,
    /// The pair facts of stored messages, read on a scan's first meeting with them.
    pairs: PairCache,
    /// Each stored message's token count per encoding, counted when first needed.
    token_counts: TokenCounts,
    /// What the last CLEAR TOOL USES settled (`store/edits.rs`).
    edit_memo: edits::EditMemo,
}

impl Store {
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    pub fn len(&self) -> usize {
        self.view.len()
    }

    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    pub fn batch_index(&self) -> usize {
        self.history.current_index()
    }

    pub fn tool_description(&self) -> Option<NodeId> {
        self.tool_description
    }

    fn store(&mut self, incoming: &Incoming) -> Vec<NodeId> {
        let t = now();
        incoming
            .messages
            .iter()
            .map(|(range, facts)| {
                self.arena
                    .push(&incoming.bytes[range.clone()], facts.role, facts.timestamp.unwrap_or(t))
            })
            .collect()
    }

    fn open_batch(&mut self, description: String) {
        self.history.end_batch(self.view.clone(), now(), description);
    }

    fn position(&self, index: i64, what: &str) -> Result<usize> {
        let len = self.len() as i64;
        let i = if index < 0 { index + len } else { index };
        if i < 0 || i >= len {
            return Err(Error::Position(format!(
                "{what}: index {index} is out of range for {len} visible messages"
            )));
        }
        Ok(i as usize)
    }

    /// A store holding `incoming` alone, as `append` to an empty store leaves it, built for a
    /// store that lives for one conversation (a batch record): the encodings are taken as they
    /// are (one arena chunk, not copied message by message) and the view is built in one go.
    /// Give the buffer back with [`Store::recycle`] when done. O(k).
    pub fn of(mut incoming: Incoming) -> Store {
        let mut store = Store::default();
        if incoming.bytes.len() > u32::MAX as usize {
            // An arena span holds 32-bit offsets: so large a conversation is stored message by message.
            store.append(&incoming);
            return store;
        }
        let t = now();
        let bytes = std::mem::take(&mut incoming.bytes);
        let messages = std::mem::take(&mut incoming.messages);
        let first = store.arena.adopt(
            bytes,
            messages
                .into_iter()
                .map(|(range, facts)| (range, facts.role, facts.timestamp.unwrap_or(t))),
        );
        let ids: Vec<NodeId> = (first..store.arena.len() as NodeId).collect();
        store.view = View::of(CowVec::from_vec(ids));
        store
    }

    /// Drop the store, keeping the buffer [`Store::of`] took for the next [`Incoming`] of this
    /// thread (a batch would otherwise grow a new one for every record).
    pub fn recycle(self) {
        recycle_scratch(self.arena.into_first_chunk());
    }

    /// APPEND: no new batch. O(k).
    pub fn append(&mut self, incoming: &Incoming) {
        for id in self.store(incoming) {
            self.view.push(id, &self.arena);
        }
    }

    /// INSERT at `0 <= position <= len`: new batch. O(n).
    pub fn insert(&mut self, position: usize, incoming: &Incoming, description: String) -> Result<()> {
        if position > self.len() {
            return Err(Error::InvalidOperation(format!(
                "insert: position {position} is out of range: it must be between 0 and {} (the visible count)",
                self.len()
            )));
        }
        self.open_batch(description);
        let ids = self.store(incoming);
        let mut visible = self.view.visible.to_vec();
        visible.splice(position..position, ids);
        self.view = View::of(CowVec::from_slice(&visible));
        Ok(())
    }

    /// REPLACE the visible message at `index` (negative counts from the end): new batch.
    /// The old message stays stored. O(1), or O(n) when the role changes (role index rebuilt).
    pub fn replace(&mut self, index: i64, incoming: &Incoming, description: String) -> Result<()> {
        let pos = self.position(index, "replace")?;
        assert_eq!(incoming.len(), 1, "replace takes one message");
        self.open_batch(description);
        let id = self.store(incoming)[0];
        let old = self.view.visible[pos];
        self.view.visible.set(pos, id);
        self.view.token_totals.forget();
        self.view
            .move_role(pos as u32, self.arena.role(old), self.arena.role(id));
        Ok(())
    }

    /// TRUNCATE: new batch. O(k) for k messages kept.
    pub fn truncate(&mut self, cuts: &Cuts, description: String) -> Result<()> {
        if cuts.is_empty() {
            return Err(Error::InvalidOperation(
                "truncate: give at least one of keep_first, keep_last, remove_first, remove_last, range, role".into(),
            ));
        }
        let kept = if let Some(role) = cuts.role {
            let positions = self.view.roles(&self.arena).of(role);
            let w = cuts.window(positions.len());
            positions.range(w).map(|p| self.view.visible[p as usize]).collect()
        } else {
            self.view.visible.sub(cuts.window(self.len()))
        };
        self.open_batch(description);
        self.view = View::of(kept);
        Ok(())
    }

    /// CLEAR: keep system/developer messages if asked, then re-add the tool description when it
    /// is no longer visible. New batch. O(n).
    pub fn clear(&mut self, keep_system: bool, description: String) {
        let mut kept: Vec<NodeId> = if keep_system {
            let mut positions: Vec<u32> = Role::ALL
                .iter()
                .filter(|r| r.is_instruction())
                .flat_map(|r| self.view.roles(&self.arena).of(*r).iter().copied())
                .collect();
            positions.sort_unstable();
            positions.into_iter().map(|p| self.view.visible[p as usize]).collect()
        } else {
            Vec::new()
        };
        if let Some(td) = self.tool_description
            && !kept.contains(&td)
        {
            kept.push(td);
        }
        self.open_batch(description);
        self.view = View::of(CowVec::from_slice(&kept));
    }

    /// The visible ids FILTER keeps. O(total text), split across cores for long histories; it
    /// takes no lock of its own, so the binding runs it with the GIL released.
    ///
    /// Each keyword is first searched for in the message's stored bytes as they are (one search
    /// over a contiguous slice, no text extraction); only a message with a match somewhere in its
    /// bytes (few, for a typical keyword) has its text checked exactly. That shortcut needs every
    /// match inside a message's text to be a match of its bytes: true for a non-empty keyword
    /// without `"\n"` (text pieces are stored verbatim and only joined by `"\n"`); other keywords
    /// take the exact check for every message. Measured at 10k messages: 0.37 ms against 0.54 ms
    /// for the exact check alone.
    pub fn filtered(&self, conditions: &Conditions) -> CowVec<NodeId> {
        let contains: Vec<Finder<'_>> = conditions.contains.iter().map(|k| Finder::new(k.as_bytes())).collect();
        let excludes: Vec<Finder<'_>> = conditions.excludes.iter().map(|k| Finder::new(k.as_bytes())).collect();
        let role_ok = |id: NodeId| conditions.roles.is_empty() || conditions.roles.contains(&self.arena.role(id));
        let ids = self.view.visible.to_vec();
        if contains.is_empty() && excludes.is_empty() {
            return ids.into_iter().filter(|&id| role_ok(id)).collect();
        }
        let prefilter = conditions
            .contains
            .iter()
            .chain(&conditions.excludes)
            .all(|k| !k.is_empty() && !k.contains('\n'));
        let keep = |id: NodeId, text: &mut String| {
            if !role_ok(id) {
                return false;
            }
            if prefilter {
                let bytes = self.arena.message(id).bytes();
                if !contains.iter().chain(&excludes).any(|f| f.find(bytes).is_some()) {
                    // No keyword anywhere in its bytes: its text contains none of them.
                    return contains.is_empty();
                }
            }
            let hay = message_text(self.arena.message(id), text);
            let found = |f: &Finder<'_>| f.find(hay.as_bytes()).is_some();
            (contains.is_empty() || contains.iter().any(found)) && !excludes.iter().any(found)
        };
        if ids.len() < PARALLEL_FROM {
            let mut text = String::new();
            return ids.into_iter().filter(|&id| keep(id, &mut text)).collect();
        }
        let parts: Vec<Vec<NodeId>> = ids
            .par_chunks(PARALLEL_CHUNK)
            .map(|chunk| {
                let mut text = String::new();
                chunk.iter().copied().filter(|&id| keep(id, &mut text)).collect()
            })
            .collect();
        parts.into_iter().flatten().collect()
    }

    /// FILTER: new batch.
    pub fn filter(&mut self, conditions: &Conditions, description: String) {
        let kept = self.filtered(conditions);
        self.open_batch(description);
        self.view = View::of(kept);
    }

    /// Open a new batch with no change; returns the index of the batch it closed.
    pub fn checkpoint(&mut self, description: String) -> usize {
        self.open_batch(description);
        self.batch_index() - 1
    }

    /// Restore batch `b` as it was when it ended; discard later batches. O(1).
    pub fn rollback(&mut self, b: usize) -> Result<()> {
        let current = self.batch_index();
        if b > current {
            return Err(Error::Batch(format!(
                "rollback: batch {b} does not exist (batches are 0..={current}, {current} is current)"
            )));
        }
        if b < current {
            self.view = self.history.reopen(b);
        }
        Ok(())
    }

    /// Store the tool description and show it after the leading system/developer messages.
    pub fn set_tool_description(&mut self, incoming: &Incoming) {
        let id = self.store(incoming)[0];
        let at = self
            .view
            .visible
            .iter()
            .take_while(|&&v| self.arena.role(v).is_instruction())
            .count();
        let mut visible = self.view.visible.to_vec();
        visible.insert(at, id);
        self.view = View::of(CowVec::from_slice(&visible));
        self.tool_description = Some(id);
    }

    /// Tag the visible message at `index`.
    pub fn mark(&mut self, index: i64, tag: &str) -> Result<()> {
        let pos = self.position(index, "mark")?;
        let id = self.view.visible[pos];
        self.marks.entry(tag.to_owned()).or_default().insert(id);
        Ok(())
    }

    // ---- queries: they return node ids; the caller reads messages from the arena ----------

    pub fn get(&self, index: i64) -> Result<NodeId> {
        Ok(self.view.visible[self.position(index, "get")?])
    }

    pub fn visible(&self) -> &CowVec<NodeId> {
        &self.view.visible
    }

    /// Positions of the visible messages of `role` (all positions when `None`).
    pub fn positions(&self, role: Option<Role>) -> Vec<u32> {
        match role {
            Some(r) => self.view.roles(&self.arena).of(r).iter().copied().collect(),
            None => (0..self.len() as u32).collect(),
        }
    }

    pub fn count(&self, role: Option<Role>) -> usize {
        role.map_or(self.len(), |r| self.view.roles(&self.arena).of(r).len())
    }

    pub fn ids_at(&self, positions: &[u32]) -> Vec<NodeId> {
        positions.iter().map(|&p| self.view.visible[p as usize]).collect()
    }

    pub fn by_role(&self, role: Role) -> Vec<NodeId> {
        self.view
            .roles(&self.arena)
            .of(role)
            .iter()
            .map(|&p| self.view.visible[p as usize])
            .collect()
    }

    /// The last `n` visible messages (of `roles`, if any), oldest first. O(n).
    pub fn recent(&self, n: usize, roles: &[Role]) -> Vec<NodeId> {
        if roles.is_empty() {
            let len = self.len();
            return self.view.visible.range(len.saturating_sub(n)..len).collect();
        }
        self.ids_at(&self.view.roles(&self.arena).last_of(roles, n))
    }

    /// `by_role(role)[start..end]`, clamped.
    pub fn role_range(&self, role: Role, start: usize, end: usize) -> Vec<NodeId> {
        let positions = self.view.roles(&self.arena).of(role);
        let end = end.min(positions.len());
        let start = start.min(end);
        positions
            .range(start..end)
            .map(|p| self.view.visible[p as usize])
            .collect()
    }

    /// Visible messages (of `role`) with `start <= timestamp < end`. O(n).
    pub fn between(&self, start: Option<f64>, end: Option<f64>, role: Option<Role>) -> Vec<NodeId> {
        let inside = |id: &NodeId| {
            let t = self.arena.timestamp(*id);
            start.is_none_or(|s| t >= s) && end.is_none_or(|e| t < e)
        };
        match role {
            Some(r) => self.by_role(r).into_iter().filter(inside).collect(),
            None => self.view.visible.iter().copied().filter(inside).collect(),
        }
    }

    /// Visible messages (of `role`) carrying `tag`, in order.
    pub fn marked(&self, tag: &str, role: Option<Role>) -> Vec<NodeId> {
        let Some(ids) = self.marks.get(tag) else {
            return Vec::new();
        };
        self.view
            .visible
            .iter()
            .copied()
            .filter(|id| ids.contains(id) && role.is_none_or(|r| self.arena.role(*id) == r))
            .collect()
    }

    /// The state of batch `b`: (visible ids, timestamp, description); the current batch has no
    /// description and the current time.
    pub fn snapshot(&self, b: usize) -> Result<(CowVec<NodeId>, f64, Option<String>)> {
        let current = self.batch_index();
        if b > current {
            return Err(Error::Batch(format!(
                "snapshot: batch {b} does not exist (batches are 0..={current})"
            )));
        }
        Ok(match self.history.ended.get(b) {
            Some(s) => (s.view.visible.clone(), s.timestamp, Some(s.description.clone())),
            None => (self.view.visible.clone(), now(), None),
        })
    }
}

/// `(role, content)` pairs as checked messages, for the core's tests.
#[cfg(test)]
pub fn incoming_of(messages: &[(&str, &str)]) -> Incoming {
    let mut incoming = Incoming::default();
    for (role, content) in messages {
        let (start, mut e) = incoming.encoder();
        let d = e.open_dict(2);
        e.key("role");
        e.str(role);
        e.key("content");
        e.str(content);
        e.close(d);
        incoming.finish(start, || "m".into()).unwrap();
    }
    incoming
}

/// JSON messages as checked messages, for the core's tests.
#[cfg(test)]
pub fn json_incoming_of(messages: &[serde_json::Value]) -> Incoming {
    let mut incoming = Incoming::default();
    for message in messages {
        let (start, mut e) = incoming.encoder();
        crate::core::value::encode_json(&mut e, message);
        incoming.finish(start, || "m".into()).unwrap();
    }
    incoming
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incoming(messages: &[(&str, &str)]) -> Incoming {
        incoming_of(messages)
    }

    fn content_of(store: &Store, id: NodeId) -> String {
        store
            .arena()
            .message(id)
            .field("content")
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn contents(store: &Store) -> Vec<String> {
        store.visible().iter().map(|&id| content_of(store, id)).collect()
    }

    fn store_of(n: usize) -> Store {
        let mut store = Store::default();
        let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let msgs: Vec<(&str, &str)> = names
            .iter()
            .enumerate()
            .map(|(i, c)| (if i % 2 == 0 { "user" } else { "assistant" }, c.as_str()))
            .collect();
        store.append(&incoming(&msgs));
        store
    }

    #[test]
    fn a_message_over_the_size_limit_is_refused_and_nothing_is_taken() {
        let mut incoming = Incoming::default();
        let (start, mut e) = incoming.encoder();
        let d = e.open_dict(2);
        e.key("role");
        e.str("user");
        e.key("content");
        e.str(&"x".repeat(300));
        e.close(d);
        let len = incoming.bytes.len() - start;
        let err = incoming
            .finish_within(start, len - 1, || "messages[0]".to_owned())
            .unwrap_err();
        let limit = len - 1;
        let reason = format!("is {len} bytes once encoded, over the limit of {limit} bytes on one message");
        assert_eq!(err, Error::message("messages[0]", reason));
        assert!(incoming.is_empty());
        incoming.finish_within(start, len, || "messages[0]".to_owned()).unwrap();
        assert_eq!(incoming.len(), 1);
    }

    #[test]
    fn role_restricted_truncate_keeps_only_that_role() {
        let mut store = store_of(10);
        store
            .truncate(
                &Cuts {
                    keep_last: Some(2),
                    role: Some(Role::User),
                    ..Cuts::default()
                },
                "t".into(),
            )
            .unwrap();
        assert_eq!(contents(&store), ["m6", "m8"]);
        assert_eq!(store.count(Some(Role::User)), 2);
        assert_eq!(store.count(Some(Role::Assistant)), 0);
    }

    #[test]
    fn rollback_restores_each_batch_as_it_ended_and_keeps_every_message() {
        let mut store = store_of(4);
        let cp = store.checkpoint("cp".into());
        store.append(&incoming(&[("user", "late")]));
        store
            .truncate(
                &Cuts {
                    keep_first: Some(1),
                    ..Cuts::default()
                },
                "t".into(),
            )
            .unwrap();
        assert_eq!(contents(&store), ["m0"]);
        store.rollback(cp + 1).unwrap();
        assert_eq!(contents(&store).len(), 5);
        store.rollback(cp).unwrap();
        assert_eq!(contents(&store), ["m0", "m1", "m2", "m3"]);
        assert_eq!(store.batch_index(), cp);
        assert_eq!(store.arena().len(), 5);
        assert!(store.rollback(cp + 1).is_err());
    }

    #[test]
    fn replace_moves_the_position_between_role_indices() {
        let mut store = store_of(3);
        let mut bad = Incoming::default();
        let (start, mut e) = bad.encoder();
        e.str("not a dict");
        assert!(bad.finish(start, || "m".into()).is_err());
        assert!(store.replace(3, &incoming(&[("user", "x")]), "r".into()).is_err());
        assert_eq!(store.batch_index(), 0, "a failed replace opens no batch");
        store
            .replace(2, &incoming(&[("assistant", "new")]), "r".into())
            .unwrap();
        assert_eq!(store.by_role(Role::User).len(), 1);
        assert_eq!(store.recent(1, &[Role::Assistant]), [3]);
        assert_eq!(store.arena().len(), 4);
    }

    /// FILTER through the byte-search shortcut agrees with the exact per-message check, on the
    /// cases that could fool it (matches in keys and roles, newlines, empty keywords).
    #[test]
    fn filter_by_byte_scan_agrees_with_the_exact_check() {
        let texts = [
            "ab", "ba", "xaab", "content", "user", "a\nb", "", "aaa", "b", "tail-a", "a", "abab",
        ];
        let msgs: Vec<(&str, &str)> = texts.iter().map(|t| ("user", *t)).collect();
        let mut store = Store::default();
        store.append(&incoming(&msgs));
        // The reference: a plain substring test on each input text.
        let exact = |contains: &[&str], excludes: &[&str]| -> Vec<String> {
            let found = |text: &str, k: &&str| text.contains(*k);
            texts
                .iter()
                .filter(|t| {
                    (contains.is_empty() || contains.iter().any(|k| found(t, k)))
                        && !excludes.iter().any(|k| found(t, k))
                })
                .map(|t| (*t).to_owned())
                .collect()
        };
        let keywords = ["ab", "a", "aa", "content", "user", "a\nb", "", "ba", "b", "zz", "role"];
        for k in keywords {
            for (contains, excludes) in [(vec![k], vec![]), (vec![], vec![k]), (vec!["a", k], vec!["b"])] {
                let conditions = Conditions {
                    contains: contains.iter().map(|s| (*s).to_owned()).collect(),
                    excludes: excludes.iter().map(|s| (*s).to_owned()).collect(),
                    ..Conditions::default()
                };
                let got: Vec<String> = store
                    .filtered(&conditions)
                    .iter()
                    .map(|&id| content_of(&store, id))
                    .collect();
                assert_eq!(
                    got,
                    exact(&contains, &excludes),
                    "contains {contains:?} excludes {excludes:?}"
                );
            }
        }
    }

    #[test]
    fn filter_matches_any_contains_and_no_excludes_on_many_cores() {
        let mut store = Store::default();
        let names: Vec<String> = (0..20_000)
            .map(|i| format!("n{i} {}", if i % 3 == 0 { "apple" } else { "pear" }))
            .collect();
        let msgs: Vec<(&str, &str)> = names.iter().map(|c| ("user", c.as_str())).collect();
        store.append(&incoming(&msgs));
        let conditions = Conditions {
            contains: vec!["apple".into()],
            excludes: vec!["n3 ".into()],
            ..Conditions::default()
        };
        store.filter(&conditions, "f".into());
        let expected = (0..20_000).filter(|i| i % 3 == 0 && *i != 3).count();
        assert_eq!(store.len(), expected);
        assert_eq!(store.count(Some(Role::User)), expected);
    }
}
