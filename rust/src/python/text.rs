//! The text of messages for Python (the rule is the core's, `core/text.rs`): the searchable text
//! that `memci inspect` shows and the page search indexes for stored pages, and the entry texts a
//! summary starts from. Messages are encoded without the message rules, so a stored page that
//! breaks them still has a text.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::core::text::{calls_text, message_text, said_text};
use crate::python::convert::Encoded;

/// A message dict, or a list or tuple of them, encoded.
fn encoded(messages: &Bound<'_, PyAny>) -> PyResult<Encoded> {
    if messages.is_instance_of::<PyDict>() {
        let mut one = Encoded::default();
        one.add(messages, &|| "message".to_owned())?;
        return Ok(one);
    }
    Ok(Encoded::of_list(messages)?)
}

/// The searchable text of each message, in order.
#[pyfunction]
pub fn message_texts(py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let encoded = encoded(messages)?;
    Ok(py.detach(|| {
        let mut buf = String::new();
        (0..encoded.len())
            .map(|i| message_text(encoded.message(i), &mut buf).to_owned())
            .collect()
    }))
}

/// What each message says and the tools it calls (`name(arguments)`, joined by `"; "`), in order.
#[pyfunction]
pub fn entry_texts(messages: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let encoded = encoded(messages)?;
    let mut buf = String::new();
    Ok((0..encoded.len())
        .map(|i| {
            let m = encoded.message(i);
            (said_text(m, &mut buf).to_owned(), calls_text(m))
        })
        .collect())
}
