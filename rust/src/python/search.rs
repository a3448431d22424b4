//! `memci._core.SearchIndex`: the core's BM25 [`SearchIndex`](crate::core::search::SearchIndex)
//! behind a lock, as a frozen pyclass. Texts are copied out of Python first; tokenizing, scoring
//! and snippets run with the GIL released, so other threads run meanwhile.

use parking_lot::RwLock;
use pyo3::prelude::*;

use crate::core::error::Error;
use crate::core::search::{self, Hit};
use crate::python::config;
use crate::python::lock;

/// The length a snippet aims at when none is given.
const DEFAULT_SNIPPET_CHARS: usize = 160;

#[pyclass(frozen, module = "memci._core", name = "SearchIndex")]
pub struct SearchIndex {
    pub(crate) inner: RwLock<search::SearchIndex>,
    pub(crate) snippet_chars: usize,
}

#[pymethods]
impl SearchIndex {
    #[new]
    #[pyo3(signature = (snippet_chars = None, neighbour_weight = 0.0))]
    fn new(snippet_chars: Option<&Bound<'_, PyAny>>, neighbour_weight: f64) -> PyResult<Self> {
        let snippet_chars = match snippet_chars {
            Some(n) => config::count(n, "SearchIndex: snippet_chars")?,
            None => DEFAULT_SNIPPET_CHARS,
        };
        if !(0.0..1.0).contains(&neighbour_weight) {
            return Err(Error::InvalidOperation(format!(
                "SearchIndex: neighbour_weight must be at least 0 and below 1, got {neighbour_weight}"
            ))
            .into());
        }
        Ok(Self {
            inner: RwLock::new(search::SearchIndex::with_neighbour_weight(neighbour_weight)),
            snippet_chars,
        })
    }

    #[getter]
    fn snippet_chars(&self) -> usize {
        self.snippet_chars
    }

    #[getter]
    fn neighbour_weight(&self, py: Python<'_>) -> f64 {
        lock::read(py, &self.inner).neighbour_weight()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).len()
    }

    fn add(&self, py: Python<'_>, page: &Bound<'_, PyAny>, text: &Bound<'_, PyAny>) -> PyResult<()> {
        let page = config::page(page, "add: page_index")?;
        let text = String::from(&*config::string(text, "add: text")?);
        py.detach(|| self.inner.write().add(page, text));
        Ok(())
    }

    /// `(page, text)` pairs, every one converted before any is added.
    fn add_many(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
        let refused = || Error::InvalidOperation("add_many: items must be a list of (page_index, text) pairs".into());
        let items: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = items.extract().map_err(|_| refused())?;
        let items = items
            .iter()
            .enumerate()
            .map(|(i, (page, text))| {
                let page = config::page(page, &format!("add_many: items[{i}] page_index"))?;
                let text = config::string(text, &format!("add_many: items[{i}] text"))?;
                Ok((page, String::from(&*text)))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        py.detach(|| self.inner.write().add_many(items));
        Ok(())
    }

    fn search(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        k: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(u64, f64, String)>> {
        let query = config::string(query, "search: query")?;
        let k = config::count(k, "search: k")?;
        let hits = py.detach(|| self.inner.read().search(&query, k, self.snippet_chars));
        Ok(hits
            .into_iter()
            .map(|Hit { page, score, snippet }| (page, score, snippet))
            .collect())
    }
}
