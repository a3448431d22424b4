//! `memci._core.MessageStore`: the core [`Store`] behind a lock, as a frozen pyclass.
//!
//! Each method takes the lock once, so every call is atomic. The lock is never waited for while
//! holding the GIL (try first, otherwise wait with the GIL released), so a thread holding the
//! lock can always get the GIL back. Messages are converted before the lock is taken.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyInt, PyList, PySlice, PyString};

use crate::core::arena::NodeId;
use crate::core::error::Error;
use crate::core::roles::Role;
use crate::core::store::{Conditions, Cuts, Store};
use crate::python::convert::{decode_ids, incoming, to_py};
use crate::python::decoded::{Decoded, SMALL_READ};
use crate::python::lock;

#[pyclass(frozen, module = "memci._core", name = "MessageStore")]
pub struct MessageStore {
    pub(crate) inner: RwLock<Store>,
    /// Recently read messages, kept decoded (small reads only).
    decoded: Decoded,
}

/// A count or position: any Python int, saturated to the `usize` range (a count larger than any
/// array acts like a large count; negatives were refused by the Python layer, and are here too).
fn count(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if let Ok(v) = obj.extract::<usize>() {
        return Ok(v);
    }
    let int = obj.cast::<PyInt>()?;
    if int.lt(0)? {
        return Err(Error::InvalidOperation(format!("{what} must be >= 0, got {int}")).into());
    }
    Ok(usize::MAX)
}

fn opt_count(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<usize>> {
    obj.map(|o| count(o, what)).transpose()
}

/// An index that may count from the end: any Python int, saturated to the `i64` range (out of
/// range either way, and reported as such).
fn index(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(v);
    }
    let int = obj.cast::<PyInt>()?;
    Ok(if int.lt(0)? { i64::MIN } else { i64::MAX })
}

fn role(name: &str, what: &str) -> Result<Role, Error> {
    Role::parse(name).ok_or_else(|| {
        Error::InvalidOperation(format!(
            "{what}: unknown role {name:?} (expected system, developer, user, assistant or tool)"
        ))
    })
}

/// The roles named, each once (a role listed twice must not be counted twice).
pub(crate) fn roles(names: Option<Vec<String>>, what: &str) -> Result<Vec<Role>, Error> {
    let mut out: Vec<Role> = Vec::new();
    for n in names.unwrap_or_default() {
        let r = role(&n, what)?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

fn opt_role(name: Option<&str>, what: &str) -> Result<Option<Role>, Error> {
    name.map(|n| role(n, what)).transpose()
}

impl MessageStore {
    pub(crate) fn read(&self, py: Python<'_>) -> RwLockReadGuard<'_, Store> {
        lock::read(py, &self.inner)
    }

    pub(crate) fn write(&self, py: Python<'_>) -> RwLockWriteGuard<'_, Store> {
        lock::write(py, &self.inner)
    }

    fn with_store(store: Store) -> Self {
        Self {
            inner: RwLock::new(store),
            decoded: Decoded::default(),
        }
    }

    /// Decode stored messages into a new list; a small read goes through the decoded cache.
    pub(crate) fn decode<'py>(
        &self,
        py: Python<'py>,
        store: &Store,
        ids: impl IntoIterator<Item = NodeId>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ids = ids.into_iter();
        if ids.size_hint().1.is_none_or(|n| n > SMALL_READ) {
            return decode_ids(py, store.arena(), ids);
        }
        let list = PyList::empty(py);
        for id in ids {
            list.append(self.decoded.message(py, store.arena(), id)?)?;
        }
        Ok(list)
    }
}

#[pymethods]
impl MessageStore {
    #[new]
    fn new() -> Self {
        Self::with_store(Store::default())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.read(py).len()
    }

    // ---- writes ------------------------------------------------------------------------------

    fn append(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        let incoming = incoming(messages)?;
        self.write(py).append(&incoming);
        Ok(())
    }

    fn insert(
        &self,
        py: Python<'_>,
        position: &Bound<'_, PyAny>,
        messages: &Bound<'_, PyAny>,
        description: String,
    ) -> PyResult<()> {
        let position = count(position, "insert: position")?;
        let incoming = incoming(messages)?;
        Ok(self.write(py).insert(position, &incoming, description)?)
    }

    fn replace(
        &self,
        py: Python<'_>,
        index: &Bound<'_, PyAny>,
        message: &Bound<'_, PyAny>,
        description: String,
    ) -> PyResult<()> {
        let index = self::index(index)?;
        let incoming = incoming(message)?;
        if incoming.len() != 1 {
            return Err(Error::message("message", "replace takes exactly one message dict").into());
        }
        Ok(self.write(py).replace(index, &incoming, description)?)
    }

    #[pyo3(signature = (description, keep_first, keep_last, remove_first, remove_last, range, role))]
    #[allow(clippy::too_many_arguments)]
    fn truncate(
        &self,
        py: Python<'_>,
        description: String,
        keep_first: Option<Bound<'_, PyAny>>,
        keep_last: Option<Bound<'_, PyAny>>,
        remove_first: Option<Bound<'_, PyAny>>,
        remove_last: Option<Bound<'_, PyAny>>,
        range: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>,
        role: Option<&str>,
    ) -> PyResult<()> {
        let cuts = Cuts {
            keep_first: opt_count(keep_first.as_ref(), "truncate: keep_first")?,
            keep_last: opt_count(keep_last.as_ref(), "truncate: keep_last")?,
            remove_first: opt_count(remove_first.as_ref(), "truncate: remove_first")?,
            remove_last: opt_count(remove_last.as_ref(), "truncate: remove_last")?,
            range: match range {
                Some((a, b)) => Some((count(&a, "truncate: range start")?, count(&b, "truncate: range end")?)),
                None => None,
            },
            role: opt_role(role, "truncate")?,
        };
        Ok(self.write(py).truncate(&cuts, description)?)
    }

    fn clear(&self, py: Python<'_>, description: String, keep_system: bool) {
        self.write(py).clear(keep_system, description);
    }

    #[pyo3(signature = (description, roles, contains, excludes))]
    fn filter(
        &self,
        py: Python<'_>,
        description: String,
        roles: Option<Vec<String>>,
        contains: Option<Vec<String>>,
        excludes: Option<Vec<String>>,
    ) -> PyResult<()> {
        let conditions = Conditions {
            roles: self::roles(roles, "filter")?,
            contains: contains.unwrap_or_default(),
            excludes: excludes.unwrap_or_default(),
        };
        // The text scan is the heavy part: do it with the GIL released.
        py.detach(|| self.inner.write().filter(&conditions, description));
        Ok(())
    }

    fn checkpoint(&self, py: Python<'_>, description: String) -> usize {
        self.write(py).checkpoint(description)
    }

    fn rollback(&self, py: Python<'_>, batch_index: &Bound<'_, PyAny>) -> PyResult<()> {
        let batch_index = index(batch_index)?;
        let b = usize::try_from(batch_index).map_err(|_| {
            Error::Batch(format!(
                "rollback: batch {batch_index} does not exist (batch indices are >= 0)"
            ))
        })?;
        Ok(self.write(py).rollback(b)?)
    }

    fn set_tool_description(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let incoming = incoming(message)?;
        if incoming.len() != 1 {
            return Err(Error::message("tool_description", "must be one message dict").into());
        }
        self.write(py).set_tool_description(&incoming);
        Ok(())
    }

    fn mark(&self, py: Python<'_>, index: &Bound<'_, PyAny>, tag: &str) -> PyResult<()> {
        let index = self::index(index)?;
        Ok(self.write(py).mark(index, tag)?)
    }

    // ---- reads -------------------------------------------------------------------------------

    fn tool_description<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let store = self.read(py);
        store
            .tool_description()
            .map(|id| to_py(py, store.arena().message(id)))
            .transpose()
    }

    fn get<'py>(&self, py: Python<'py>, index: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let index = self::index(index)?;
        let store = self.read(py);
        let id = store.get(index)?;
        self.decoded.message(py, store.arena(), id)
    }

    /// `arr[a:b:c]` with Python's slice rules, resolved against the length under the lock, so
    /// the slice is atomic.
    fn slice<'py>(&self, py: Python<'py>, key: &Bound<'_, PySlice>) -> PyResult<Bound<'py, PyList>> {
        let store = self.read(py);
        let len = isize::try_from(store.len()).unwrap_or(isize::MAX);
        let idx = key.indices(len)?;
        if idx.step == 1 {
            let start = idx.start.max(0) as usize;
            return self.decode(py, &store, store.visible().range(start..start + idx.slicelength));
        }
        let visible = store.visible();
        let ids = (0..idx.slicelength as isize).map(|k| visible[(idx.start + k * idx.step) as usize]);
        self.decode(py, &store, ids)
    }

    fn take<'py>(&self, py: Python<'py>, positions: Vec<i64>) -> PyResult<Bound<'py, PyList>> {
        let store = self.read(py);
        let ids = positions.iter().map(|&p| store.get(p)).collect::<Result<Vec<_>, _>>()?;
        self.decode(py, &store, ids)
    }

    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let store = self.read(py);
        self.decode(py, &store, store.visible().iter().copied())
    }

    fn all_messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let store = self.read(py);
        self.decode(py, &store, 0..store.arena().len() as NodeId)
    }

    fn by_role<'py>(&self, py: Python<'py>, role: &str) -> PyResult<Bound<'py, PyList>> {
        let r = self::role(role, "by_role")?;
        let store = self.read(py);
        self.decode(py, &store, store.by_role(r))
    }

    /// `roles` is one role name or a sequence of them (None: every role).
    #[pyo3(signature = (n, roles))]
    fn recent<'py>(
        &self,
        py: Python<'py>,
        n: &Bound<'_, PyAny>,
        roles: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let n = count(n, "recent: n")?;
        let roles = match roles {
            Some(one) if one.is_instance_of::<PyString>() => vec![role(one.cast::<PyString>()?.to_str()?, "recent")?],
            Some(many) => self::roles(Some(many.extract()?), "recent")?,
            None => Vec::new(),
        };
        let store = self.read(py);
        self.decode(py, &store, store.recent(n, &roles))
    }

    /// `by_role(role)[key]` for a step-1 slice, resolved under the lock, so it is atomic.
    fn role_range<'py>(&self, py: Python<'py>, role: &str, key: &Bound<'_, PySlice>) -> PyResult<Bound<'py, PyList>> {
        let r = self::role(role, "role_range")?;
        let store = self.read(py);
        let len = isize::try_from(store.count(Some(r))).unwrap_or(isize::MAX);
        let idx = key.indices(len)?;
        let start = idx.start.max(0) as usize;
        self.decode(py, &store, store.role_range(r, start, start + idx.slicelength))
    }

    #[pyo3(signature = (role))]
    fn count(&self, py: Python<'_>, role: Option<&str>) -> PyResult<usize> {
        let r = opt_role(role, "count")?;
        Ok(self.read(py).count(r))
    }

    #[pyo3(signature = (role))]
    fn indices<'py>(&self, py: Python<'py>, role: Option<&str>) -> PyResult<Bound<'py, PyByteArray>> {
        let r = opt_role(role, "indices")?;
        let positions = self.read(py).positions(r);
        let bytes: Vec<u8> = positions.iter().flat_map(|&p| i64::from(p).to_ne_bytes()).collect();
        Ok(PyByteArray::new(py, &bytes))
    }

    #[pyo3(signature = (start, end, role))]
    fn between<'py>(
        &self,
        py: Python<'py>,
        start: Option<f64>,
        end: Option<f64>,
        role: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let r = opt_role(role, "between")?;
        let store = self.read(py);
        self.decode(py, &store, store.between(start, end, r))
    }

    #[pyo3(signature = (tag, role))]
    fn marked<'py>(&self, py: Python<'py>, tag: &str, role: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let r = opt_role(role, "marked")?;
        let store = self.read(py);
        self.decode(py, &store, store.marked(tag, r))
    }

    fn timestamps(&self, py: Python<'_>) -> Vec<f64> {
        let store = self.read(py);
        store.visible().iter().map(|&id| store.arena().timestamp(id)).collect()
    }

    #[getter]
    fn batch_index(&self, py: Python<'_>) -> usize {
        self.read(py).batch_index()
    }

    #[allow(clippy::type_complexity)]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
        batch_index: &Bound<'_, PyAny>,
    ) -> PyResult<(usize, f64, Bound<'py, PyList>, usize, Option<String>)> {
        let batch_index = index(batch_index)?;
        let store = self.read(py);
        let b = usize::try_from(batch_index).map_err(|_| {
            Error::Batch(format!(
                "snapshot: batch {batch_index} does not exist (batch indices are >= 0)"
            ))
        })?;
        let (visible, timestamp, description) = store.snapshot(b)?;
        let count = visible.len();
        let messages = self.decode(py, &store, visible.iter().copied())?;
        Ok((b, timestamp, messages, count, description))
    }

    fn stats(&self, py: Python<'_>) -> (usize, usize, usize, usize) {
        let store = self.read(py);
        (
            store.arena().len(),
            store.len(),
            store.batch_index() + 1,
            store.batch_index(),
        )
    }

    fn to_json(&self, py: Python<'_>) -> String {
        let store = self.read(py);
        py.detach(|| store.to_json())
    }

    #[staticmethod]
    fn from_json(py: Python<'_>, text: &str) -> PyResult<Self> {
        let store = py.detach(|| Store::from_json(text))?;
        Ok(Self::with_store(store))
    }

    // ---- tokens (see python/tokens.rs) -------------------------------------------------------

    /// The tokens of the visible messages (priming included); O(1) once counted.
    fn token_count(&self, py: Python<'_>, encoding: &str) -> PyResult<u64> {
        let e = crate::python::tokens::encoding(encoding)?;
        Ok(py.detach(|| self.inner.write().token_count(e)))
    }

    /// The tokens of each visible message, in order.
    fn message_token_counts(&self, py: Python<'_>, encoding: &str) -> PyResult<Vec<u64>> {
        let e = crate::python::tokens::encoding(encoding)?;
        Ok(py.detach(|| self.inner.write().message_token_counts(e)))
    }

    /// TRIM TO TOKENS: a new batch (see python/trim.rs).
    #[pyo3(signature = (description, max_tokens, strategy, keep_system, start_on, end_on, allow_partial, encoding, counter))]
    #[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
    fn trim_to_tokens(
        &self,
        py: Python<'_>,
        description: String,
        max_tokens: &Bound<'_, PyAny>,
        strategy: &str,
        keep_system: bool,
        start_on: Option<Vec<String>>,
        end_on: Option<Vec<String>>,
        allow_partial: bool,
        encoding: &str,
        counter: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let max_tokens = count(max_tokens, "trim_to_tokens: max_tokens")? as u64;
        crate::python::trim::trim_to_tokens(
            self,
            py,
            description,
            max_tokens,
            strategy,
            keep_system,
            start_on,
            end_on,
            allow_partial,
            encoding,
            counter.as_ref(),
        )
    }

    fn copy(&self, py: Python<'_>) -> Self {
        let store = self.read(py);
        Self::with_store(store.clone())
    }
}
