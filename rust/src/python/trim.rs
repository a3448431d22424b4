//! `MessageStore.trim_to_tokens`: with an encoding, the whole trim runs in the core under one lock
//! with the GIL released; with a Python counter, the counter is never called while the store is
//! locked (it may use the array itself): the messages are read, counted, the trim planned, and
//! applied only if the visible list is still the one planned on (otherwise it starts over).

use pyo3::prelude::*;
use pyo3::types::PyInt;

use crate::core::error::Error;
use crate::core::trim::{Budget, Roles, Strategy, partial, select};
use crate::core::value::ValueRef;
use crate::python::convert::to_py;
use crate::python::store::{MessageStore, roles};
use crate::python::tokens::encoding;

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

#[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
pub fn trim_to_tokens(
    store: &MessageStore,
    py: Python<'_>,
    description: String,
    max_tokens: u64,
    strategy: &str,
    keep_system: bool,
    start_on: Option<Vec<String>>,
    end_on: Option<Vec<String>>,
    allow_partial: bool,
    encoding_name: &str,
    counter: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let strategy = match strategy {
        "last" => Strategy::Last,
        "first" => Strategy::First,
        other => {
            return Err(Error::InvalidOperation(format!(
                "trim_to_tokens: strategy must be 'first' or 'last', got {other:?}"
            ))
            .into());
        }
    };
    let e = encoding(encoding_name)?;
    let mut budget = Budget {
        max_tokens,
        strategy,
        keep_system,
        start_on: Roles::of(&roles(start_on, "trim_to_tokens: start_on")?),
        end_on: Roles::of(&roles(end_on, "trim_to_tokens: end_on")?),
        allow_partial,
        priming: e.priming(),
    };
    let Some(counter) = counter else {
        py.detach(|| store.inner.write().trim_to_tokens(&budget, e, description));
        return Ok(());
    };
    budget.priming = 0;
    for _ in 0..ATTEMPTS {
        let visible = store.read(py).visible().clone();
        let mut counts = Vec::with_capacity(visible.len());
        for (i, &id) in visible.iter().enumerate() {
            let message = to_py(py, store.read(py).arena().message(id))?;
            counts.push(call_counter(counter, message, &|| format!("message {i}"))?);
        }
        let (selection, candidate) = {
            let s = store.read(py);
            let selection = select(&visible, s.arena(), &budget, &mut |pos| counts[pos]);
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
        if store
            .write(py)
            .apply_trim(&visible, &selection, cut, &budget, description.clone())
        {
            return Ok(());
        }
    }
    Err(Error::InvalidOperation(format!(
        "trim_to_tokens: the array changed while the counter ran, {ATTEMPTS} times in a row"
    ))
    .into())
}
