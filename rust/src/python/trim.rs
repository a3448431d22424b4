//! `MessageStore.trim_to_tokens`: with an encoding, the whole trim runs in the core under one lock
//! with the GIL released; with a Python counter, the counter is never called while the store is
//! locked (it may use the array itself): the messages are read, counted, the trim planned, and
//! applied only if the visible list is still the one planned on (otherwise it starts over).

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyInt;

use crate::core::config::Budget;
use crate::core::error::Error;
use crate::core::store::Store;
use crate::core::trim::{partial, select};
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

/// TRIM TO TOKENS on the store behind `store`: counted in `budget.encoding` (under one lock,
/// the GIL released), or by `counter`.
pub fn trim_to_tokens(
    store: &RwLock<Store>,
    py: Python<'_>,
    budget: &Budget,
    description: String,
    counter: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let Some(counter) = counter else {
        py.detach(|| store.write().trim_to_tokens(budget, description));
        return Ok(());
    };
    let strategy = budget.strategy;
    for _ in 0..ATTEMPTS {
        let visible = lock::read(py, store).visible().clone();
        let mut counts = Vec::with_capacity(visible.len());
        for (i, &id) in visible.iter().enumerate() {
            let message = to_py(py, lock::read(py, store).arena().message(id))?;
            counts.push(call_counter(counter, message, &|| format!("message {i}"))?);
        }
        let (selection, candidate) = {
            let s = lock::read(py, store);
            let selection = select(&visible, s.arena(), budget, 0, &mut |pos| counts[pos], &mut |_| 0);
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
