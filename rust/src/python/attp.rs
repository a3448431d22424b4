//! ATTP answers read for Python (the reading is the core's, `core/attp.rs`).

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::core::attp::{ToolCall, read_tool_call};

/// The `[tool_call]` of an ATTP answer: `(code, None)` to run `code`, `(None, None)` when the
/// status is `"fail"`, `(None, reason)` when it is refused (not TOML, not valid Unicode, no
/// `[tool_call]` table, another status, no code string). Never raises; the GIL is released while
/// the TOML is read. O(text).
#[pyfunction]
pub fn read_attp_call(py: Python<'_>, text: &Bound<'_, PyString>) -> (Option<String>, Option<String>) {
    let Ok(text) = text.to_str() else {
        return (
            None,
            Some("the answer is not valid Unicode (it holds a lone surrogate)".to_owned()),
        );
    };
    match py.detach(|| read_tool_call(text)) {
        Ok(ToolCall::Run(code)) => (Some(code), None),
        Ok(ToolCall::GaveUp) => (None, None),
        Err(reason) => (None, Some(reason)),
    }
}
