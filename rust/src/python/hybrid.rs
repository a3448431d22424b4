//! `memci._core.VectorIndex` and `memci._core.hybrid_search`: the core's page vectors
//! ([`crate::core::hybrid`]) behind a lock, and BM25 fused with cosine similarity. Vectors cross
//! as bytes of little-endian `f32` (the Python side makes them with numpy, checked there); the
//! scoring and the fusion run with the GIL released.

use parking_lot::RwLock;
use pyo3::prelude::*;

use crate::core::error::Error;
use crate::core::hybrid::{self, Fusion};
use crate::python::lock;
use crate::python::search::SearchIndex;

#[pyclass(frozen, module = "memci._core", name = "VectorIndex")]
#[derive(Default)]
pub struct VectorIndex {
    inner: RwLock<hybrid::VectorIndex>,
}

/// `bytes` of little-endian `f32`s as vectors of `dim` components.
fn vectors(data: &[u8], dim: usize, place: &str) -> Result<Vec<Vec<f32>>, Error> {
    if dim == 0 || data.len() % (dim * 4) != 0 {
        return Err(Error::InvalidOperation(format!(
            "{place}: {} bytes are not vectors of {dim} float32 values",
            data.len()
        )));
    }
    Ok(data
        .chunks_exact(dim * 4)
        .map(|row| {
            row.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect())
}

fn fusion(method: &str, weight: f64) -> Result<Fusion, Error> {
    if !(0.0..=1.0).contains(&weight) {
        return Err(Error::InvalidOperation(format!(
            "hybrid search: weight must be between 0 and 1, got {weight}"
        )));
    }
    match method {
        "rrf" => Ok(Fusion::Rrf(weight)),
        "convex" => Ok(Fusion::Convex(weight)),
        _ => Err(Error::InvalidOperation(format!(
            "hybrid search: fusion must be 'rrf' or 'convex', got {method:?}"
        ))),
    }
}

#[pymethods]
impl VectorIndex {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).len()
    }

    /// The dimension (0 before the first vector).
    #[getter]
    fn dim(&self, py: Python<'_>) -> usize {
        lock::read(py, &self.inner).dim()
    }

    fn __contains__(&self, py: Python<'_>, page: u64) -> bool {
        lock::read(py, &self.inner).contains(page)
    }

    /// Add the vectors of `pages` (`data`: their `dim`-component rows), all or none.
    fn add_many(&self, py: Python<'_>, pages: Vec<u64>, data: &[u8], dim: usize) -> PyResult<()> {
        let rows = vectors(data, dim, "VectorIndex.add_many")?;
        if rows.len() != pages.len() {
            return Err(Error::InvalidOperation(format!(
                "VectorIndex.add_many: {} pages but {} vectors",
                pages.len(),
                rows.len()
            ))
            .into());
        }
        let items: Vec<(u64, Vec<f32>)> = pages.into_iter().zip(rows).collect();
        py.detach(|| self.inner.write().add_many(items))
            .map_err(|(i, e)| Error::InvalidOperation(format!("vector {i} {e}")).into())
    }

    /// The `k` pages nearest `query` (bytes of `dim` float32) by cosine similarity, best first.
    fn nearest(&self, py: Python<'_>, query: &[u8], k: usize) -> PyResult<Vec<(u64, f64)>> {
        let query = vectors(query, query.len() / 4, "VectorIndex.nearest")?.remove(0);
        py.detach(|| self.inner.read().nearest(&query, k))
            .map_err(|e| Error::InvalidOperation(format!("the query vector {e}")).into())
    }
}

/// `lexical` and `dense` ((page, score) lists, best first) fused by `method` (`"rrf"` or
/// `"convex"`) with `weight` on the dense side: the `k` best (page, score).
#[pyfunction]
pub fn fuse_ranks(
    py: Python<'_>,
    lexical: Vec<(u64, f64)>,
    dense: Vec<(u64, f64)>,
    method: &str,
    weight: f64,
    k: usize,
) -> PyResult<Vec<(u64, f64)>> {
    let fusion = fusion(method, weight)?;
    Ok(py.detach(|| hybrid::fuse(&lexical, &dense, fusion, k)))
}

/// The `k` best pages for `query`: the `depth` best by BM25 in `search` and the `depth` nearest
/// `query_vector` (bytes of float32) in `vectors`, fused by `method` with `weight` on the dense
/// side; each (page, fused score, snippet). O(postings + pages * dim + depth log depth).
#[pyfunction]
#[allow(clippy::too_many_arguments)] // one call from Python: the arguments of one search
pub fn hybrid_search(
    py: Python<'_>,
    search: &SearchIndex,
    vectors: &VectorIndex,
    query: &str,
    query_vector: &[u8],
    k: usize,
    method: &str,
    weight: f64,
    depth: usize,
) -> PyResult<Vec<(u64, f64, String)>> {
    let fusion = fusion(method, weight)?;
    let query_vector = self::vectors(query_vector, query_vector.len() / 4, "hybrid_search")?.remove(0);
    let chars = search.snippet_chars;
    py.detach(|| {
        let lexical_index = search.inner.read();
        let lexical = lexical_index.scores(query, depth.max(k));
        let dense = vectors.inner.read().nearest(&query_vector, depth.max(k))?;
        Ok(hybrid::fuse(&lexical, &dense, fusion, k)
            .into_iter()
            .filter_map(|(page, score)| {
                lexical_index
                    .snippet_of(page, query, chars)
                    .map(|snippet| (page, score, snippet))
            })
            .collect())
    })
    .map_err(|e: hybrid::VectorError| Error::InvalidOperation(format!("the query vector {e}")).into())
}
