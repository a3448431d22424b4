//! `memci._core.PageWindow`: the core [`Window`] (system chapter and active pages over one
//! chain) behind a lock, as a frozen pyclass. Messages are converted before the lock is taken;
//! each method takes the lock once, so every call is atomic. The archive, the contents page and
//! the policies are Python (`memci.context`); this class only holds and moves the runs.

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::core::error::Error;
use crate::core::pages::{PageIndex, Window};
use crate::core::text::{calls_text, message_text, said_text};
use crate::core::tokens::Encoding;
use crate::core::turns::Thinking;
use crate::python::config::{self, named, optional};
use crate::python::convert::{decode_ids, incoming};
use crate::python::lock;

/// A page as archiving reads it: its messages, the searchable text of each, and each one's entry
/// text (what it says, the tools it calls).
type PageRead<'py> = (Bound<'py, PyList>, Vec<String>, Vec<(String, String)>);

#[pyclass(frozen, module = "memci._core", name = "PageWindow")]
pub struct PageWindow {
    inner: RwLock<Window>,
}

/// A page index from Python: page indices start at 1.
fn page_index(index: &Bound<'_, PyAny>) -> Result<PageIndex, Error> {
    config::page(index, "PageWindow: index")
}

#[pymethods]
impl PageWindow {
    #[new]
    fn new() -> Self {
        Self {
            inner: RwLock::new(Window::default()),
        }
    }

    /// Messages in the window: the system chapter and the active pages.
    fn __len__(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).len()
    }

    fn set_system(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        let incoming = incoming(messages)?;
        lock::write(py, &self.inner).set_system(&incoming);
        Ok(())
    }

    fn open_page(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<PageIndex> {
        let incoming = incoming(messages)?;
        Ok(lock::write(py, &self.inner).open_page(&incoming)?)
    }

    fn open_page_at(&self, py: Python<'_>, index: &Bound<'_, PyAny>, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        let index = page_index(index)?;
        let incoming = incoming(messages)?;
        Ok(lock::write(py, &self.inner).open_page_at(index, &incoming)?)
    }

    fn join(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<PageIndex> {
        let incoming = incoming(messages)?;
        Ok(lock::write(py, &self.inner).join(&incoming)?)
    }

    /// Unlink an active page from the window in O(1).
    fn detach(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<()> {
        let index = page_index(index)?;
        lock::write(py, &self.inner).detach(index)?;
        Ok(())
    }

    /// Take back the page just opened; its index will be given again.
    fn undo_open(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<()> {
        let index = page_index(index)?;
        Ok(lock::write(py, &self.inner).undo_open(index)?)
    }

    /// The messages of an active page.
    fn page<'py>(&self, py: Python<'py>, index: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let index = page_index(index)?;
        let window = lock::read(py, &self.inner);
        let ids = window
            .page_ids(index)
            .ok_or_else(|| Error::InvalidOperation(format!("page {index} is not in the window")))?;
        decode_ids(py, window.arena(), ids)
    }

    /// The messages of an active page, the searchable text of each and its entry text (what it
    /// says and the tools it calls, as `entry_texts` gives them), read under one lock: all that
    /// archiving the page needs (the summarizer's page and lines, the search index's text), so
    /// the page crosses to Python once (then the O(1) detach).
    fn page_texts<'py>(&self, py: Python<'py>, index: &Bound<'_, PyAny>) -> PyResult<PageRead<'py>> {
        let index = page_index(index)?;
        let window = lock::read(py, &self.inner);
        let ids = window
            .page_ids(index)
            .ok_or_else(|| Error::InvalidOperation(format!("page {index} is not in the window")))?;
        let mut buf = String::new();
        let texts = ids
            .iter()
            .map(|&id| message_text(window.arena().message(id), &mut buf).to_owned())
            .collect();
        let entry_texts = ids
            .iter()
            .map(|&id| {
                let message = window.arena().message(id);
                (said_text(message, &mut buf).to_owned(), calls_text(message))
            })
            .collect();
        Ok((decode_ids(py, window.arena(), ids)?, texts, entry_texts))
    }

    /// For each `k` from 0 to the number of active pages, the tokens of the window (the system
    /// chapter and the active pages) with its `k` oldest pages left out, sent as one request: the
    /// count `memci.tokens.count_messages` gives those messages, from counts the window keeps (each
    /// message is counted once, the first time it is needed).
    #[pyo3(signature = (encoding, thinking = None))]
    fn tokens_without_oldest(
        &self,
        py: Python<'_>,
        encoding: &Bound<'_, PyAny>,
        thinking: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<u64>> {
        let encoding: Encoding = named(encoding, "PageWindow.tokens_without_oldest: encoding")?;
        let thinking: Thinking = optional(thinking, "PageWindow.tokens_without_oldest: thinking")?.unwrap_or_default();
        Ok(py.detach(|| self.inner.write().tokens_without_oldest(encoding, thinking)))
    }

    /// The indices of the active pages, oldest first.
    fn page_indices(&self, py: Python<'_>) -> Vec<PageIndex> {
        lock::read(py, &self.inner).active().iter().map(|p| p.index).collect()
    }

    /// Every message of the window, in order: the system chapter, then the active pages.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let window = lock::read(py, &self.inner);
        decode_ids(py, window.arena(), window.ids())
    }

    /// Pages in the window; the newest is the open one.
    #[getter]
    fn active_count(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).active().len()
    }

    #[getter]
    fn system_len(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).system_len()
    }

    #[getter]
    fn next_index(&self, py: Python<'_>) -> PageIndex {
        lock::read(py, &self.inner).next_index()
    }
}
