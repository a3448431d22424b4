//! Recently read messages, kept decoded.
//!
//! An agent loop reads the same few recent messages again and again (the last user turn, the
//! last tool result). Decoding one builds every string anew: about 0.7 µs for a user message of a
//! few hundred characters, three times what the pure-Python backwards scan spends finding three of
//! them. Copying a kept decoded dict costs a fraction of that. Stored messages never change and
//! node ids are never reused, so a kept entry never goes stale and needs no invalidation.
//!
//! What is handed out is always a fresh copy: dicts and lists are copied all the way down and
//! only immutable leaves (str, int, float, bool, None) are shared, so a caller mutating what it
//! got changes nothing kept, and the store still never aliases anything a caller holds.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::core::arena::{Arena, NodeId};
use crate::python::convert::to_py;

/// Decoded messages kept per store (first in, first out).
const CAPACITY: usize = 64;
/// Messages whose encoding is larger than this are not kept (a huge tool result would pin memory).
const MAX_BYTES: usize = 16 << 10;
/// Reads of more messages than this go straight to the decoder: they would only churn the cache.
pub const SMALL_READ: usize = 32;

/// A kept decoded message, and whether it is a dict holding only immutable values (then one
/// `dict.copy()` is a complete fresh copy).
struct Kept {
    template: Py<PyAny>,
    flat: bool,
}

#[derive(Default)]
struct Entries {
    by_id: HashMap<NodeId, Kept>,
    order: VecDeque<NodeId>,
}

#[derive(Default)]
pub struct Decoded {
    entries: Mutex<Entries>,
}

impl Decoded {
    /// A fresh Python object for stored message `id`, through the cache.
    ///
    /// The lock is only ever tried, never waited for: a reentrant read (a finalizer run by the
    /// garbage collector in the middle of a copy) or a concurrent one simply decodes.
    pub fn message<'py>(&self, py: Python<'py>, arena: &Arena, id: NodeId) -> PyResult<Bound<'py, PyAny>> {
        let kept = self
            .entries
            .try_lock()
            .and_then(|e| e.by_id.get(&id).map(|k| (k.template.clone_ref(py), k.flat)));
        if let Some((template, flat)) = kept {
            let template = template.bind(py);
            return match template.cast_exact::<PyDict>() {
                Ok(dict) if flat => Ok(dict.copy()?.into_any()),
                _ => fresh(template),
            };
        }
        let value = arena.message(id);
        let decoded = to_py(py, value)?;
        if value.bytes().len() > MAX_BYTES {
            return Ok(decoded);
        }
        let Some(mut e) = self.entries.try_lock() else {
            return Ok(decoded);
        };
        if e.by_id.contains_key(&id) {
            return Ok(decoded);
        }
        // Kept: from now on the decoded object is the template, so the caller gets a copy.
        if e.order.len() == CAPACITY
            && let Some(old) = e.order.pop_front()
        {
            e.by_id.remove(&old);
        }
        let flat = decoded
            .cast_exact::<PyDict>()
            .is_ok_and(|d| d.values().iter().all(|v| !is_container(&v)));
        e.order.push_back(id);
        e.by_id.insert(
            id,
            Kept {
                template: decoded.clone().unbind(),
                flat,
            },
        );
        drop(e);
        fresh(&decoded)
    }
}

fn is_container(value: &Bound<'_, PyAny>) -> bool {
    value.is_exact_instance_of::<PyDict>() || value.is_exact_instance_of::<PyList>()
}

/// A copy of a decoded value: new dicts and lists all the way down, immutable leaves shared.
fn fresh<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(dict) = value.cast_exact::<PyDict>() {
        let out = dict.copy()?;
        for (key, item) in dict.iter() {
            if is_container(&item) {
                out.set_item(key, fresh(&item)?)?;
            }
        }
        return Ok(out.into_any());
    }
    if let Ok(list) = value.cast_exact::<PyList>() {
        let out = PyList::empty(value.py());
        for item in list.iter() {
            out.append(fresh(&item)?)?;
        }
        return Ok(out.into_any());
    }
    Ok(value.clone())
}
