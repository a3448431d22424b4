//! The binding: converts between Python objects and the core's encodings, takes the store's
//! lock without blocking the GIL, maps errors to `memci.errors`, and delegates everything else.

pub mod attp;
pub mod batch;
pub mod config;
pub mod convert;
pub mod decoded;
pub mod edits;
pub mod errors;
pub mod hybrid;
pub mod lock;
pub mod pages;
pub mod pairs;
pub mod search;
pub mod store;
pub mod text;
pub mod tokens;
pub mod trim;

#[cfg(feature = "count-alloc")]
use pyo3::prelude::*;

/// Bytes currently allocated by the Rust core in this process (all stores together). Only in
/// builds with the `count-alloc` feature, which counts every allocation (the memory bench's).
#[cfg(feature = "count-alloc")]
#[pyfunction]
pub fn allocated_bytes() -> usize {
    crate::alloc::allocated()
}
