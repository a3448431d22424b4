//! Token counting for Python: texts and messages are converted with the GIL held, then counted
//! with it released (on all cores for batches).

use std::ops::Range;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyList, PyTuple};
use rayon::prelude::*;

use crate::core::error::Error;
use crate::core::tokens::Encoding;
use crate::core::value::ValueRef;
use crate::python::convert::{dumped, encode_value, type_name};

/// Texts longer than this are counted with the GIL released.
const DETACH_FROM_BYTES: usize = 16 << 10;

pub fn encoding(name: &str) -> Result<Encoding, Error> {
    Encoding::parse(name)
}

/// Messages encoded one after another into one buffer, ready to count without the GIL.
struct Encoded {
    bytes: Vec<u8>,
    spans: Vec<Range<usize>>,
}

impl Encoded {
    /// Add one message: a dict, or an SDK object taken as its [`dumped`] dict.
    fn add(&mut self, obj: &Bound<'_, PyAny>, path: &dyn Fn() -> String) -> Result<(), Error> {
        let dump;
        let obj = if obj.is_instance_of::<PyDict>() {
            obj
        } else {
            dump = dumped(obj)
                .map_err(|err| Error::message(path(), format!("model_dump() failed: {err}")))?
                .filter(PyAnyMethods::is_instance_of::<PyDict>);
            let Some(dump) = dump.as_ref() else {
                let kind = type_name(obj);
                return Err(Error::message(path(), format!("a message must be a dict, got {kind}")));
            };
            dump
        };
        let start = self.bytes.len();
        encode_value(obj, &mut self.bytes, &path())?;
        self.spans.push(start..self.bytes.len());
        Ok(())
    }

    fn of_list(messages: &Bound<'_, PyAny>) -> Result<Self, Error> {
        let mut out = Self {
            bytes: Vec::new(),
            spans: Vec::new(),
        };
        let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = messages.cast::<PyList>() {
            list.iter().collect()
        } else if let Ok(tuple) = messages.cast::<PyTuple>() {
            tuple.iter().collect()
        } else {
            return Err(Error::message("messages", "expected a list of message dicts"));
        };
        for (i, m) in items.iter().enumerate() {
            out.add(m, &|| format!("messages[{i}]"))?;
        }
        Ok(out)
    }

    fn message(&self, i: usize) -> ValueRef<'_> {
        ValueRef::new(&self.bytes[self.spans[i].clone()])
    }
}

/// The tokens of `text` in `encoding`.
#[pyfunction]
pub fn count_text(py: Python<'_>, text: &str, encoding: &str) -> PyResult<u64> {
    let e = self::encoding(encoding)?;
    if text.len() < DETACH_FROM_BYTES {
        return Ok(e.count(text));
    }
    Ok(py.detach(|| e.count(text)))
}

/// The tokens of each text, counted on all cores with the GIL released.
#[pyfunction]
pub fn count_texts(py: Python<'_>, texts: Vec<PyBackedStr>, encoding: &str) -> PyResult<Vec<u64>> {
    let e = self::encoding(encoding)?;
    Ok(py.detach(|| e.count_batch(&texts)))
}

/// The tokens one message costs in a chat request.
#[pyfunction]
pub fn count_message(message: &Bound<'_, PyAny>, encoding: &str) -> PyResult<u64> {
    let e = self::encoding(encoding)?;
    let mut encoded = Encoded {
        bytes: Vec::new(),
        spans: Vec::new(),
    };
    encoded.add(message, &|| "message".to_owned())?;
    Ok(e.count_message(encoded.message(0)))
}

/// The tokens of each message (no priming), counted on all cores with the GIL released.
#[pyfunction]
pub fn count_message_list(py: Python<'_>, messages: &Bound<'_, PyAny>, encoding: &str) -> PyResult<Vec<u64>> {
    let e = self::encoding(encoding)?;
    let encoded = Encoded::of_list(messages)?;
    Ok(py.detach(|| {
        (0..encoded.spans.len())
            .into_par_iter()
            .with_min_len(16)
            .map(|i| e.count_message(encoded.message(i)))
            .collect()
    }))
}

/// The canonical name of an encoding given by name or by model name.
#[pyfunction]
pub fn encoding_name(encoding: &str) -> PyResult<&'static str> {
    Ok(self::encoding(encoding)?.name())
}

/// The tokens a list of messages costs beyond its messages (the reply priming), when non-empty.
#[pyfunction]
pub fn reply_priming(encoding: &str) -> PyResult<u64> {
    Ok(self::encoding(encoding)?.priming())
}

/// The ranks file of an exact encoding, as tiktoken reads it (rebuilt from the compiled-in ranks).
#[pyfunction]
pub fn ranks_file(py: Python<'_>, encoding: &str) -> PyResult<String> {
    let e = self::encoding(encoding)?;
    py.detach(|| e.ranks_file())
        .ok_or_else(|| Error::InvalidOperation(format!("{}: has no ranks (it is not a BPE encoding)", e.name())).into())
}
