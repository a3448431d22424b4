//! memci's Rust core. [`core`] holds the algorithms and never touches Python; [`python`] is the
//! thin binding that converts, locks and delegates. The module `memci._core` is declared here.

#[cfg(feature = "count-alloc")]
pub mod alloc;
pub mod core;
pub mod python;

use pyo3::prelude::*;

/// The compiled core of memci.
#[pymodule]
mod _core {
    #[pymodule_export]
    use crate::python::store::MessageStore;

    #[pymodule_export]
    use crate::python::pages::PageWindow;

    #[pymodule_export]
    use crate::python::text::{entry_texts, message_texts};

    #[pymodule_export]
    use crate::python::pairs::{MessageView, sanitize_store, scan_list, scan_store};

    #[pymodule_export]
    use crate::python::tokens::{
        count_message, count_message_list, count_text, count_texts, current_turn_start, encoding_name, ranks_file,
        reply_priming,
    };

    #[pymodule_export]
    use crate::python::search::SearchIndex;

    #[pymodule_export]
    use crate::python::hybrid::{VectorIndex, fuse_ranks, hybrid_search};

    #[pymodule_export]
    use crate::python::batch::{BatchPipeline, JsonlRun};

    #[pymodule_export]
    use crate::python::attp::read_attp_call;

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        #[cfg(feature = "count-alloc")]
        m.add_function(pyo3::wrap_pyfunction!(crate::python::allocated_bytes, m)?)?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
