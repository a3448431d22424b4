//! `MessageStore.trim_to_tokens`: with an encoding, the whole trim runs in the core under one lock
//! with the GIL released; with a Python counter, the counter is never called while the store is
//! locked (it may use the array itself): the messages are read, counted as they are sent (an
//! earlier turn's without its thinking, as the encoding path counts them), the trim planned, and
//! applied only if the visible list is still the one planned on (otherwise it starts over).

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString};

use crate::core::config::{Budget, Strategy};
use crate::core::error::Error;
use crate::core::store::Store;
use crate::core::trim::{kept_end, partial, plan};
use crate::core::turns::Thinking;
use crate::core::value::ValueRef;
use crate::python::convert::to_py;
use crate::python::lock;

/// A Python counter is retried this many times when the array keeps changing under it.
const ATTEMPTS: usize = 8;

/// `counter(message)`, which must be an int >= 0.
fn call_counter(counter: &Bound<'_, PyAny>, message: Bound<'_, PyAny>, place: &dyn Fn() -> String) -> PyResult<u64> {
    let value = counter.call1((message,))?;
    if value.is_instance_of::<PyInt>()
        && !value.is_instance_of::<pyo3::types::PyBool>()
        && let Ok(n) = value.extract::<u64>()
    {
        return Ok(n);
    }
    let shown = value.repr().map_or_else(|_| "?".into(), |r| r.to_string());
    Err(Error::InvalidOperation(format!(
        "trim_to_tokens: the counter must return an int >= 0, got {shown} for {}",
        place()
    ))
    .into())
}

/// `message` (a fresh dict) as it is sent in an earlier turn: without its `thinking` and
/// `redacted_thinking` blocks; None for a Responses reasoning item, which is not sent at all.
fn without_thinking(message: Bound<'_, PyAny>) -> PyResult<Option<Bound<'_, PyAny>>> {
    let Ok(dict) = message.cast::<PyDict>() else {
        return Ok(Some(message));
    };
    if dict.get_item("type")?.is_some_and(|kind| is(&kind, &["reasoning"])) {
        return Ok(None);
    }
    if let Some(content) = dict.get_item("content")?
        && let Ok(blocks) = content.cast::<PyList>()
    {
        let kept = PyList::empty(message.py());
        for block in blocks.iter() {
            let thinking = block
                .cast::<PyDict>()
                .ok()
                .and_then(|b| b.get_item("type").ok().flatten())
                .is_some_and(|kind| is(&kind, &["thinking", "redacted_thinking"]));
            if !thinking {
                kept.append(block)?;
            }
        }
        if kept.len() != blocks.len() {
            dict.set_item("content", kept)?;
        }
    }
    Ok(Some(message))
}

/// Whether `value` is a str equal to one of `names`.
fn is(value: &Bound<'_, PyAny>, names: &[&str]) -> bool {
    value
        .cast::<PyString>()
        .ok()
        .and_then(|s| s.to_str().ok().map(|s| names.contains(&s)))
        .unwrap_or(false)
}

/// TRIM TO TOKENS on the store behind `store`: counted in `budget.encoding` (under one lock,
/// the GIL released), or by `counter`.
pub fn trim_to_tokens(
    store: &RwLock<Store>,
    py: Python<'_>,
    budget: &Budget,
    thinking: Thinking,
    description: String,
    counter: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let Some(counter) = counter else {
        py.detach(|| store.write().trim_to_tokens(budget, thinking, description));
        return Ok(());
    };
    let strategy = budget.strategy;
    for _ in 0..ATTEMPTS {
        let (visible, turn) = {
            let s = lock::read(py, store);
            let visible = s.visible().clone();
            let turn = match (thinking, strategy) {
                (Thinking::DropEarlier, Strategy::Last) => s.turn_start(kept_end(&visible, s.arena(), budget)),
                _ => 0,
            };
            (visible, turn)
        };
        let mut counts = Vec::with_capacity(visible.len());
        for (i, &id) in visible.iter().enumerate() {
            let message = to_py(py, lock::read(py, store).arena().message(id))?;
            let sent = if i < turn {
                without_thinking(message)?
            } else {
                Some(message)
            };
            counts.push(match sent {
                Some(message) => call_counter(counter, message, &|| format!("message {i}"))?,
                None => 0,
            });
        }
        let (selection, candidate) = {
            let s = lock::read(py, store);
            let selection = plan(&visible, s.arena(), budget, 0, &mut |pos| counts[pos], &mut |_| 0);
            let bytes = selection
                .candidate
                .map(|(pos, _)| s.arena().message(visible[pos]).bytes().to_vec());
            (selection, bytes)
        };
        let cut = match (candidate, selection.candidate) {
            (Some(bytes), Some((pos, room))) => partial(ValueRef::new(&bytes), room, strategy, &mut |m| {
                call_counter(counter, to_py(py, m)?, &|| format!("a cut of message {pos}"))
            })?,
            _ => None,
        };
        if lock::write(py, store).apply_trim(&visible, &selection, cut, budget, description.clone()) {
            return Ok(());
        }
    }
    Err(Error::InvalidOperation(format!(
        "trim_to_tokens: the array changed while the counter ran, {ATTEMPTS} times in a row"
    ))
    .into())
}
