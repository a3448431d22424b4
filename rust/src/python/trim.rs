//! `MessageStore.trim_to_tokens`: with an encoding, the whole trim runs in the core under one lock
//! with the GIL released; with a Python counter, the counter is never called while the store is
//! locked (it may use the array itself): the messages are read, counted as they are sent (an
//! earlier turn's without its thinking, as the encoding path counts them), the trim planned, and
//! applied only if the visible list is still the one planned on (otherwise it starts over).
//! A Python `splitter` (`trim_to_tokens(allow_partial=True, text_splitter=...)`) cuts the one
//! message cut to fit: it too runs with the store unlocked, between the plan and its application.

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString};

use crate::core::config::Budget;
use crate::core::error::Error;
use crate::core::store::Store;
use crate::core::trim::{by_lines, partial, plan};
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

/// `splitter(text)`: a list of str (the Python side checks they join back to `text`).
fn call_splitter(splitter: &Bound<'_, PyAny>, text: &str) -> PyResult<Vec<String>> {
    splitter.call1((text,))?.extract()
}

/// `partial`'s splitter: `splitter` when given, else whole lines.
fn split_with<'a>(splitter: Option<&'a Bound<'_, PyAny>>) -> impl FnMut(&str) -> PyResult<Vec<String>> + 'a {
    move |text| match splitter {
        Some(splitter) => call_splitter(splitter, text),
        None => by_lines(text),
    }
}

/// TRIM TO TOKENS on the store behind `store`: counted in `budget.encoding` (under one lock,
/// the GIL released), or by `counter`; the message cut to fit is cut by `splitter` if given.
pub fn trim_to_tokens(
    store: &RwLock<Store>,
    py: Python<'_>,
    budget: &Budget,
    description: String,
    counter: Option<&Bound<'_, PyAny>>,
    splitter: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let Some(counter) = counter else {
        let Some(splitter) = splitter else {
            py.detach(|| store.write().trim_to_tokens(budget, description));
            return Ok(());
        };
        return split_in_encoding(store, py, budget, description, splitter);
    };
    for _ in 0..ATTEMPTS {
        let (visible, turn) = {
            let s = lock::read(py, store);
            let visible = s.visible().clone();
            let turn = s.earlier_turns_end(&visible, budget);
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
            (Some(bytes), Some((pos, room))) => partial(
                ValueRef::new(&bytes),
                room,
                budget.strategy,
                &mut |m| call_counter(counter, to_py(py, m)?, &|| format!("a cut of message {pos}")),
                &mut split_with(splitter),
            )?,
            _ => None,
        };
        if lock::write(py, store).apply_trim(&visible, &selection, cut, budget, description.clone()) {
            return Ok(());
        }
    }
    Err(changed_under("counter"))
}

/// TRIM TO TOKENS counted in `budget.encoding`, the candidate cut by `splitter`: planned under
/// the lock (the cached counts), cut with the store unlocked (the splitter is Python code that may
/// read the array), applied if the visible list is still the one planned on.
fn split_in_encoding(
    store: &RwLock<Store>,
    py: Python<'_>,
    budget: &Budget,
    description: String,
    splitter: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let encoding = budget.encoding;
    for _ in 0..ATTEMPTS {
        let (visible, selection, candidate) = {
            let mut s = lock::write(py, store);
            let (visible, selection) = s.plan_trim(budget);
            let bytes = selection
                .candidate
                .map(|(pos, _)| s.arena().message(visible[pos]).bytes().to_vec());
            (visible, selection, bytes)
        };
        let cut = match (candidate, selection.candidate) {
            (Some(bytes), Some((_, room))) => partial(
                ValueRef::new(&bytes),
                room,
                budget.strategy,
                &mut |m| Ok(encoding.count_message(m)),
                &mut split_with(Some(splitter)),
            )?,
            _ => None,
        };
        if lock::write(py, store).apply_trim(&visible, &selection, cut, budget, description.clone()) {
            return Ok(());
        }
    }
    Err(changed_under("text splitter"))
}

/// The error of a trim whose array kept changing while `what` (Python code) ran.
fn changed_under(what: &str) -> PyErr {
    Error::InvalidOperation(format!(
        "trim_to_tokens: the array changed while the {what} ran, {ATTEMPTS} times in a row"
    ))
    .into()
}
