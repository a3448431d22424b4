//! The one place core errors become Python exceptions: the classes of `memci.errors`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

use crate::core::error::Error;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn raise<'py>(py: Python<'py>, class: &str, args: impl pyo3::call::PyCallArgs<'py>) -> PyErr {
    let made = ERRORS
        .get_or_try_init(py, || py.import("memci.errors").map(Bound::unbind))
        .and_then(|m| m.bind(py).getattr(class))
        .and_then(|cls| cls.call1(args));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        Python::attach(|py| {
            let text = e.to_string();
            match e {
                Error::InvalidMessage { path, .. } => raise(py, "InvalidMessageError", (text, path)),
                Error::InvalidOperation(_) => raise(py, "InvalidOperationError", (text,)),
                Error::Batch(_) => raise(py, "BatchError", (text,)),
                Error::Position(_) => raise(py, "PositionError", (text,)),
                Error::State(_) => raise(py, "StateError", (text,)),
            }
        })
    }
}
