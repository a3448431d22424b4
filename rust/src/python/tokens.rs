//! Token counting for Python: texts and messages are converted with the GIL held, then counted
//! with it released (on all cores for batches).

use pyo3::prelude::*;

use crate::core::error::Error;
use crate::core::tokens::Encoding;
use crate::core::turns::{self, Thinking};

use crate::python::config::{named, optional, string, strings};
use crate::python::convert::Encoded;

/// Texts longer than this are counted with the GIL released.
const DETACH_FROM_BYTES: usize = 16 << 10;

/// The tokens of `text` in `encoding`.
#[pyfunction]
pub fn count_text(py: Python<'_>, text: &Bound<'_, PyAny>, encoding: &Bound<'_, PyAny>) -> PyResult<u64> {
    let text = string(text, "count: text")?;
    let e: Encoding = named(encoding, "count: encoding")?;
    let text: &str = &text;
    if text.len() < DETACH_FROM_BYTES {
        return Ok(e.count(text));
    }
    Ok(py.detach(|| e.count(text)))
}

/// The tokens of each text, counted on all cores with the GIL released.
#[pyfunction]
pub fn count_texts(py: Python<'_>, texts: &Bound<'_, PyAny>, encoding: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let texts = strings(texts, "count_batch: texts")?;
    let e: Encoding = named(encoding, "count_batch: encoding")?;
    Ok(py.detach(|| e.count_batch(&texts)))
}

/// The tokens one message costs in a chat request.
#[pyfunction]
pub fn count_message(message: &Bound<'_, PyAny>, encoding: &Bound<'_, PyAny>) -> PyResult<u64> {
    let e: Encoding = named(encoding, "count_message: encoding")?;
    let mut encoded = Encoded::default();
    encoded.add(message, &|| "message".to_owned())?;
    Ok(e.count_message(encoded.message(0)))
}

/// The tokens of each message sent in one request, the thinking of earlier turns dropped or
/// counted by `thinking` (no priming), counted on all cores with the GIL released.
#[pyfunction]
#[pyo3(signature = (messages, encoding, thinking = None))]
pub fn count_message_list(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    encoding: &Bound<'_, PyAny>,
    thinking: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<u64>> {
    let e: Encoding = named(encoding, "count_messages: encoding")?;
    let thinking: Thinking = optional(thinking, "count_messages: thinking")?.unwrap_or_default();
    let encoded = Encoded::of_list(messages)?;
    Ok(py.detach(|| {
        let messages: Vec<_> = (0..encoded.len()).map(|i| encoded.message(i)).collect();
        e.count_message_list(&messages, thinking)
    }))
}

/// The position of the last of `messages` that opens a user turn (0 when none does): the
/// thinking of the messages before it belongs to earlier turns.
#[pyfunction]
pub fn current_turn_start(messages: &Bound<'_, PyAny>) -> PyResult<usize> {
    let encoded = Encoded::of_list(messages)?;
    Ok(turns::current_turn_start(
        (0..encoded.len()).map(|i| encoded.message(i)),
    ))
}

/// The canonical name of an encoding given by name or by model name; `place` names it in an
/// error (the public function or class it was given to).
#[pyfunction]
pub fn encoding_name(encoding: &Bound<'_, PyAny>, place: &str) -> PyResult<&'static str> {
    Ok(named::<Encoding>(encoding, &format!("{place}: encoding"))?.name())
}

/// The tokens a list of messages costs beyond its messages (the reply priming), when non-empty.
#[pyfunction]
pub fn reply_priming(encoding: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(named::<Encoding>(encoding, "reply_priming: encoding")?.priming())
}

/// The ranks file of an exact encoding, as tiktoken reads it (rebuilt from the compiled-in ranks).
#[pyfunction]
pub fn ranks_file(py: Python<'_>, encoding: &Bound<'_, PyAny>) -> PyResult<String> {
    let e: Encoding = named(encoding, "ranks_file: encoding")?;
    py.detach(|| e.ranks_file())
        .ok_or_else(|| Error::InvalidOperation(format!("{}: has no ranks (it is not a BPE encoding)", e.name())).into())
}
