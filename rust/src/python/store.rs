//! `memci._core.MessageStore`: the core [`Store`] behind a lock, as a frozen pyclass.
//!
//! Each method takes the lock once, so every call is atomic. The lock is never waited for while
//! holding the GIL (try first, otherwise wait with the GIL released), so a thread holding the
//! lock can always get the GIL back. Messages are converted before the lock is taken.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyList, PySlice};

use crate::core::arena::NodeId;
use crate::core::config::{Encoding, Role};
use crate::core::error::Error;
use crate::core::store::Store;
use crate::core::turns::Thinking;
use crate::python::config::{self, Described, Operation, named, optional};
use crate::python::convert::{decode_ids, incoming, to_py};
use crate::python::decoded::{Decoded, SMALL_READ};
use crate::python::lock;

#[pyclass(frozen, module = "memci._core", name = "MessageStore")]
pub struct MessageStore {
    pub(crate) inner: RwLock<Store>,
    /// Recently read messages, kept decoded (small reads only).
    decoded: Decoded,
}

/// `(total_messages, current_batch_messages, total_batches, current_batch_index)`.
type Stats = (usize, usize, usize, usize);

fn stats(store: &Store) -> Stats {
    (
        store.arena().len(),
        store.len(),
        store.batch_index() + 1,
        store.batch_index(),
    )
}

fn batch(batch_index: i64, what: &str) -> Result<usize, Error> {
    usize::try_from(batch_index).map_err(|_| {
        Error::Batch(format!(
            "{what}: batch {batch_index} does not exist (batch indices are >= 0)"
        ))
    })
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

    /// Run a `memci.ops` config (all but `Sanitize`): its fields are read and checked before
    /// the lock is taken; `counter` is TRIM TO TOKENS' Python counter and `splitter` its text
    /// splitter (a function of a str to a list of str joining back to it). The stats after it,
    /// read under the same lock.
    #[pyo3(signature = (op, counter = None, splitter = None))]
    fn execute(
        &self,
        py: Python<'_>,
        op: &Bound<'_, PyAny>,
        counter: Option<&Bound<'_, PyAny>>,
        splitter: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Stats> {
        let Described { operation, description } = Described::of(op)?;
        if (counter.is_some() || splitter.is_some()) && !matches!(operation, Operation::TrimToTokens(_)) {
            return Err(Error::InvalidOperation("a counter or splitter is given only to trim_to_tokens".into()).into());
        }
        match operation {
            Operation::Append(messages) => self.write(py).append(&messages),
            Operation::Insert { position, messages } => self.write(py).insert(position, &messages, description)?,
            Operation::Replace { index, message } => self.write(py).replace(index, &message, description)?,
            Operation::Truncate(cuts) => self.write(py).truncate(&cuts, description)?,
            Operation::Clear { keep_system } => self.write(py).clear(keep_system, description),
            // The text scan is the heavy part: do it with the GIL released.
            Operation::Filter(conditions) => py.detach(|| self.inner.write().filter(&conditions, description)),
            Operation::Rollback { batch_index } => self.write(py).rollback(batch(batch_index, "rollback")?)?,
            Operation::Checkpoint => {
                self.write(py).checkpoint(description);
            }
            Operation::TrimToTokens(budget) => {
                crate::python::trim::trim_to_tokens(&self.inner, py, &budget, description, counter, splitter)?;
            }
        }
        Ok(stats(&self.read(py)))
    }

    /// Run a context edit of `memci.ops` (`ClearToolUses`, `ClearThinking`), planned and applied
    /// with the GIL released: the stats after it and `(cleared_tool_uses, cleared_thinking_turns,
    /// cleared_input_tokens)`.
    fn edit(&self, py: Python<'_>, op: &Bound<'_, PyAny>) -> PyResult<(Stats, (usize, usize, u64))> {
        let (edit, description) = crate::python::edits::Edit::of(op)?;
        let plan = py.detach(|| edit.run(&mut self.inner.write(), description));
        let cleared = (
            plan.cleared_tool_uses,
            plan.cleared_thinking_turns,
            plan.cleared_input_tokens,
        );
        Ok((stats(&self.read(py)), cleared))
    }

    fn set_tool_description(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let incoming = incoming(message)?;
        if incoming.len() != 1 {
            return Err(Error::message("tool_description", "must be one message dict").into());
        }
        self.write(py).set_tool_description(&incoming);
        Ok(())
    }

    fn mark(&self, py: Python<'_>, index: &Bound<'_, PyAny>, tag: &Bound<'_, PyAny>) -> PyResult<()> {
        let index = config::index(index, "mark: index", Error::Position)?;
        let tag = config::string(tag, "mark: tag")?;
        Ok(self.write(py).mark(index, &tag)?)
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
        let index = config::index(index, "getitem: index", Error::Position)?;
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

    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let store = self.read(py);
        self.decode(py, &store, store.visible().iter().copied())
    }

    fn all_messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let store = self.read(py);
        self.decode(py, &store, 0..store.arena().len() as NodeId)
    }

    fn by_role<'py>(&self, py: Python<'py>, role: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let r: Role = named(role, "by_role: role")?;
        let store = self.read(py);
        self.decode(py, &store, store.by_role(r))
    }

    /// The last `n` visible messages of `role`, or of any of `roles` (an empty list, or None:
    /// every role; not both), oldest first.
    #[pyo3(signature = (n, role = None, roles = None))]
    fn recent<'py>(
        &self,
        py: Python<'py>,
        n: &Bound<'_, PyAny>,
        role: Option<&Bound<'_, PyAny>>,
        roles: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let n = config::count(n, "recent: n")?;
        let roles = match (role.filter(|r| !r.is_none()), roles.filter(|r| !r.is_none())) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidOperation("recent: give role or roles, not both".into()).into());
            }
            (Some(one), None) => vec![named::<Role>(one, "recent: role")?],
            (None, many) => config::roles(many, "recent: roles", false)?,
        };
        let store = self.read(py);
        self.decode(py, &store, store.recent(n, &roles))
    }

    /// `by_role(role)[key]` for a step-1 slice, resolved under the lock, so it is atomic.
    fn role_range<'py>(
        &self,
        py: Python<'py>,
        role: &Bound<'_, PyAny>,
        key: &Bound<'_, PySlice>,
    ) -> PyResult<Bound<'py, PyList>> {
        let r: Role = named(role, "role_range: role")?;
        let store = self.read(py);
        let len = isize::try_from(store.count(Some(r))).unwrap_or(isize::MAX);
        let idx = key.indices(len)?;
        let start = idx.start.max(0) as usize;
        self.decode(py, &store, store.role_range(r, start, start + idx.slicelength))
    }

    #[pyo3(signature = (role = None))]
    fn count(&self, py: Python<'_>, role: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let r = optional::<Role>(role, "count: role")?;
        Ok(self.read(py).count(r))
    }

    #[pyo3(signature = (role = None))]
    fn indices<'py>(&self, py: Python<'py>, role: Option<&Bound<'_, PyAny>>) -> PyResult<Bound<'py, PyByteArray>> {
        let r = optional::<Role>(role, "indices: role")?;
        let positions = self.read(py).positions(r);
        let bytes: Vec<u8> = positions.iter().flat_map(|&p| i64::from(p).to_ne_bytes()).collect();
        Ok(PyByteArray::new(py, &bytes))
    }

    #[pyo3(signature = (start, end, role = None))]
    fn between<'py>(
        &self,
        py: Python<'py>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        role: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let start = config::seconds(start, "between: start")?;
        let end = config::seconds(end, "between: end")?;
        let r = optional::<Role>(role, "between: role")?;
        let store = self.read(py);
        self.decode(py, &store, store.between(start, end, r))
    }

    #[pyo3(signature = (tag, role = None))]
    fn marked<'py>(
        &self,
        py: Python<'py>,
        tag: &Bound<'_, PyAny>,
        role: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tag = config::string(tag, "marked: tag")?;
        let r = optional::<Role>(role, "marked: role")?;
        let store = self.read(py);
        self.decode(py, &store, store.marked(&tag, r))
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
        let b = batch(
            config::index(batch_index, "snapshot: batch_index", Error::Batch)?,
            "snapshot",
        )?;
        let store = self.read(py);
        let (visible, timestamp, description) = store.snapshot(b)?;
        let count = visible.len();
        let messages = self.decode(py, &store, visible.iter().copied())?;
        Ok((b, timestamp, messages, count, description))
    }

    fn stats(&self, py: Python<'_>) -> Stats {
        stats(&self.read(py))
    }

    fn to_json(&self, py: Python<'_>) -> String {
        let store = self.read(py);
        py.detach(|| store.to_json())
    }

    #[staticmethod]
    fn from_json(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Self> {
        // A text that is not Unicode is a state that cannot be loaded, like any other.
        let text = config::string(text, "from_json: text").map_err(|e| Error::State(e.to_string()))?;
        let store = py.detach(|| Store::from_json(&text))?;
        Ok(Self::with_store(store))
    }

    // ---- tokens -----------------------------------------------------------------------------

    /// The tokens of the visible messages sent in one request (priming included, the thinking of
    /// earlier turns dropped or counted by `thinking`); O(1) once counted.
    #[pyo3(signature = (encoding, thinking = None))]
    fn token_count(
        &self,
        py: Python<'_>,
        encoding: &Bound<'_, PyAny>,
        thinking: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let e: Encoding = named(encoding, "token_count: encoding")?;
        let thinking: Thinking = optional(thinking, "token_count: thinking")?.unwrap_or_default();
        Ok(py.detach(|| self.inner.write().token_count_with(e, thinking)))
    }

    fn copy(&self, py: Python<'_>) -> Self {
        let store = self.read(py);
        Self::with_store(store.clone())
    }
}
