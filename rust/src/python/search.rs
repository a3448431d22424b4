//! `memci._core.SearchIndex`: the core's BM25 [`SearchIndex`](crate::core::search::SearchIndex)
//! behind a lock, as a frozen pyclass. Texts are copied out of Python first; tokenizing, scoring
//! and snippets run with the GIL released, so other threads run meanwhile.

use parking_lot::RwLock;
use pyo3::prelude::*;

use crate::core::search::{self, Hit};
use crate::python::lock;

#[pyclass(frozen, module = "memci._core", name = "SearchIndex")]
pub struct SearchIndex {
    inner: RwLock<search::SearchIndex>,
    snippet_chars: usize,
}

#[pymethods]
impl SearchIndex {
    #[new]
    #[pyo3(signature = (snippet_chars = 160))]
    fn new(snippet_chars: usize) -> Self {
        Self {
            inner: RwLock::new(search::SearchIndex::default()),
            snippet_chars,
        }
    }

    #[getter]
    fn snippet_chars(&self) -> usize {
        self.snippet_chars
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).len()
    }

    fn add(&self, py: Python<'_>, page: u64, text: String) {
        py.detach(|| self.inner.write().add(page, text));
    }

    fn add_many(&self, py: Python<'_>, items: Vec<(u64, String)>) {
        py.detach(|| self.inner.write().add_many(items));
    }

    fn search(&self, py: Python<'_>, query: &str, k: usize) -> Vec<(u64, f64, String)> {
        let hits = py.detach(|| self.inner.read().search(query, k, self.snippet_chars));
        hits.into_iter()
            .map(|Hit { page, score, snippet }| (page, score, snippet))
            .collect()
    }
}
