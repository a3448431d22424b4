//! Python objects to encoded messages and back.
//!
//! Encoding dispatches on exact types first (the common case: `dict`, `str`, `list`, `int`) and
//! falls back to subclass checks (`StrEnum`, `IntEnum`, named tuples), which come back as their
//! base type. Decoding builds fresh objects every time, so nothing returned aliases the store.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::core::arena::{Arena, NodeId};
use crate::core::error::Error;
use std::ops::Range;

use crate::core::store::Incoming;
use crate::core::value::{Encoder, MAX_VALUE_BYTES, Value, ValueRef, WELL_KNOWN_KEYS, read_within};

/// Deeper than this is refused: it also stops a self-containing list from recursing forever.
const MAX_DEPTH: usize = 128;

/// Where a value failed, innermost segment first (filled in as the error unwinds).
struct Failure {
    segments: Vec<String>,
    reason: String,
}

impl Failure {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            segments: Vec::new(),
            reason: reason.into(),
        }
    }

    fn within(mut self, segment: String) -> Self {
        self.segments.push(segment);
        self
    }

    fn into_error(self, prefix: &str) -> Error {
        let mut path = prefix.to_owned();
        for s in self.segments.iter().rev() {
            path.push_str(s);
        }
        Error::message(path, self.reason)
    }
}

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "object".into(), |n| n.to_string())
}

fn encode(obj: &Bound<'_, PyAny>, e: &mut Encoder<'_>, depth: usize) -> Result<(), Failure> {
    if depth > MAX_DEPTH {
        return Err(Failure::new(format!("nested more than {MAX_DEPTH} levels deep")));
    }
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return encode_str(s, e);
    }
    if obj.is_none() {
        e.null();
        return Ok(());
    }
    if let Ok(d) = obj.cast_exact::<PyDict>() {
        return encode_dict(d, e, depth);
    }
    if let Ok(l) = obj.cast_exact::<PyList>() {
        return encode_seq(l.iter(), l.len(), e, depth);
    }
    if let Ok(b) = obj.cast_exact::<PyBool>() {
        e.bool(b.is_true());
        return Ok(());
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return encode_int(i, e);
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let v = f.value();
        if !v.is_finite() {
            return Err(Failure::new(format!(
                "{v} is not a JSON value (only finite floats are)"
            )));
        }
        e.float(v);
        return Ok(());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return encode_seq(t.iter(), t.len(), e, depth);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return encode_str(s, e);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return encode_dict(d, e, depth);
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return encode_seq(l.iter(), l.len(), e, depth);
    }
    if let Some(dump) = dumped(obj).map_err(|err| Failure::new(format!("model_dump() failed: {err}")))? {
        return encode(&dump, e, depth + 1);
    }
    Err(Failure::new(format!(
        "{} is not a JSON value (expected dict, list, tuple, str, int, float, bool or None)",
        type_name(obj)
    )))
}

/// What an SDK object (anything with a callable `model_dump`: OpenAI, Anthropic and Agents SDK
/// types, any pydantic model) stands for: `model_dump(mode="json", exclude_unset=True)`, what the
/// OpenAI and Anthropic SDKs themselves send for such an object (plain `model_dump()` for an
/// object whose `model_dump` takes no such arguments). `None` for anything else.
pub fn dumped<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = obj.py();
    let Ok(method) = obj.getattr(intern!(py, "model_dump")) else {
        return Ok(None);
    };
    if !method.is_callable() {
        return Ok(None);
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "mode"), intern!(py, "json"))?;
    kwargs.set_item(intern!(py, "exclude_unset"), true)?;
    match method.call((), Some(&kwargs)) {
        Ok(dump) => Ok(Some(dump)),
        Err(err) if err.is_instance_of::<PyTypeError>(py) => method.call0().map(Some),
        Err(err) => Err(err),
    }
}

fn encode_str(s: &Bound<'_, PyString>, e: &mut Encoder<'_>) -> Result<(), Failure> {
    let text = s
        .to_str()
        .map_err(|_| Failure::new("str is not valid Unicode (it holds a lone surrogate)"))?;
    e.str(text);
    Ok(())
}

fn encode_int(i: &Bound<'_, PyInt>, e: &mut Encoder<'_>) -> Result<(), Failure> {
    if let Ok(v) = i.extract::<i64>() {
        e.int(v);
    } else {
        // An int subclass is stored as the plain int it is: its own __str__ may print anything.
        let plain = if i.is_exact_instance_of::<PyInt>() {
            i.clone().into_any()
        } else {
            i.py()
                .get_type::<PyInt>()
                .call1((i,))
                .map_err(|err| Failure::new(err.to_string()))?
        };
        let text = plain.str().map_err(|err| Failure::new(err.to_string()))?;
        e.big_int(text.to_str().map_err(|err| Failure::new(err.to_string()))?);
    }
    Ok(())
}

fn encode_dict(d: &Bound<'_, PyDict>, e: &mut Encoder<'_>, depth: usize) -> Result<(), Failure> {
    let open = e.open_dict(d.len());
    for (k, v) in d.iter() {
        let Ok(key) = k.cast::<PyString>() else {
            return Err(Failure::new(format!(
                "keys must be str, got {} key {}",
                type_name(&k),
                k.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            )));
        };
        let key = key.to_str().map_err(|_| Failure::new("a key is not valid Unicode"))?;
        e.key(key);
        encode(&v, e, depth + 1).map_err(|f| f.within(format!(".{key}")))?;
    }
    e.close(open);
    Ok(())
}

fn encode_seq<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    len: usize,
    e: &mut Encoder<'_>,
    depth: usize,
) -> Result<(), Failure> {
    let open = e.open_list(len);
    for (i, v) in items.enumerate() {
        encode(&v, e, depth + 1).map_err(|f| f.within(format!("[{i}]")))?;
    }
    e.close(open);
    Ok(())
}

/// Encode and check one message; `path` names it in errors (`messages[3]`, `message`).
/// An SDK object is taken as its [`dumped`] dict.
pub fn add_message(obj: &Bound<'_, PyAny>, incoming: &mut Incoming, path: &dyn Fn() -> String) -> Result<(), Error> {
    if !obj.is_instance_of::<PyDict>() {
        let dump = dumped(obj).map_err(|err| Error::message(path(), format!("model_dump() failed: {err}")))?;
        return match dump {
            Some(dump) if dump.is_instance_of::<PyDict>() => add_message(&dump, incoming, path),
            _ => Err(Error::message(
                path(),
                format!("a message must be a dict, got {}", type_name(obj)),
            )),
        };
    }
    let (start, mut e) = incoming.encoder();
    encode(obj, &mut e, 0).map_err(|f| f.into_error(&path()))?;
    incoming.finish(start, path)
}

/// Encode any JSON value at the end of `buf` without the message rules (for counting); `path`
/// names it in errors (`messages[3]`). A value over [`MAX_VALUE_BYTES`] encoded is refused.
pub fn encode_value(obj: &Bound<'_, PyAny>, buf: &mut Vec<u8>, path: &str) -> Result<(), Error> {
    let start = buf.len();
    encode(obj, &mut Encoder::new(buf), 0).map_err(|f| f.into_error(path))?;
    read_within(&buf[start..], MAX_VALUE_BYTES).map_err(|reason| Error::message(path, reason))?;
    Ok(())
}

/// Messages encoded one after another into one buffer, without the message rules (for counting
/// and reading texts), ready to read without the GIL.
#[derive(Default)]
pub struct Encoded {
    bytes: Vec<u8>,
    spans: Vec<Range<usize>>,
}

impl Encoded {
    /// Encode one message: a dict, or an SDK object taken as its [`dumped`] dict (not checked
    /// against the message rules).
    pub fn add(&mut self, obj: &Bound<'_, PyAny>, path: &dyn Fn() -> String) -> Result<(), Error> {
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

    /// Encode each message dict of a list or tuple.
    pub fn of_list(messages: &Bound<'_, PyAny>) -> Result<Self, Error> {
        let mut out = Self::default();
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

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn message(&self, i: usize) -> ValueRef<'_> {
        ValueRef::new(&self.bytes[self.spans[i].clone()])
    }
}

/// Encode a message or a list of messages (all-or-nothing: the caller stores nothing on error).
pub fn incoming(obj: &Bound<'_, PyAny>) -> Result<Incoming, Error> {
    let mut incoming = Incoming::default();
    if obj.is_instance_of::<PyDict>() {
        add_message(obj, &mut incoming, &|| "message".to_owned())?;
    } else if let Ok(list) = obj.cast::<PyList>() {
        for (i, m) in list.iter().enumerate() {
            add_message(&m, &mut incoming, &|| format!("messages[{i}]"))?;
        }
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        for (i, m) in t.iter().enumerate() {
            add_message(&m, &mut incoming, &|| format!("messages[{i}]"))?;
        }
    } else if obj.hasattr(intern!(obj.py(), "model_dump")).unwrap_or(false) {
        add_message(obj, &mut incoming, &|| "message".to_owned())?;
    } else {
        return Err(Error::message(
            "messages",
            format!("expected a message dict or a list of them, got {}", type_name(obj)),
        ));
    }
    Ok(incoming)
}

static KEYS: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();

fn keys(py: Python<'_>) -> &Vec<Py<PyString>> {
    KEYS.get_or_init(py, || {
        WELL_KNOWN_KEYS
            .iter()
            .map(|k| PyString::intern(py, k).unbind())
            .collect()
    })
}

/// String values nearly every message holds (roles, the tool-call type): decoded to one shared,
/// interned `str` each instead of a new allocation (strings are immutable, so sharing is safe).
const COMMON_VALUES: [&str; 6] = ["system", "developer", "user", "assistant", "tool", "function"];
static VALUES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();

fn common_value<'py>(py: Python<'py>, s: &str) -> Option<Bound<'py, PyAny>> {
    if s.len() > 9 {
        return None;
    }
    let i = COMMON_VALUES.iter().position(|v| *v == s)?;
    let values = VALUES.get_or_init(py, || {
        COMMON_VALUES.iter().map(|v| PyString::intern(py, v).unbind()).collect()
    });
    Some(values[i].bind(py).clone().into_any())
}

/// A fresh Python object for an encoded value.
pub fn to_py<'py>(py: Python<'py>, v: ValueRef<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v.get() {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::BigInt(s) => py.get_type::<PyInt>().call1((s,))?,
        Value::Float(f) => PyFloat::new(py, f).into_any(),
        Value::Str(s) => common_value(py, s).unwrap_or_else(|| PyString::new(py, s).into_any()),
        Value::List(items) => {
            let list = PyList::empty(py);
            for item in items.values() {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Dict(items) => {
            let dict = PyDict::new(py);
            let cached = keys(py);
            for (key, item) in items.keyed_entries() {
                let value = to_py(py, item)?;
                match key.code {
                    Some(c) => dict.set_item(cached[c].bind(py), value)?,
                    None => dict.set_item(key.name, value)?,
                }
            }
            dict.into_any()
        }
    })
}

/// Fresh Python dicts for stored messages, in the order given.
pub fn decode_ids<'py>(
    py: Python<'py>,
    arena: &Arena,
    ids: impl IntoIterator<Item = NodeId>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for id in ids {
        list.append(to_py(py, arena.message(id))?)?;
    }
    Ok(list)
}
