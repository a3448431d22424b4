//! The pair scan from Python: on a list of message dicts (reading only the few fields it needs),
//! and on a `MessageStore` (straight from the stored encoding, with the GIL released).
//!
//! A finding leaves as `(index, role, code, ids, other)`; `memci.sanitize` turns it into a
//! `RemovedMessage` with a reason a person can act on.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::core::arena::NodeId;
use crate::core::cow_vec::CowVec;
use crate::core::error::Error;
use crate::core::message;
use crate::core::pairs::{self, Facts, Kind};
use crate::core::roles::Role;
use crate::core::sanitize::Finding;
use crate::python::convert::{dumped, type_name};
use crate::python::store::MessageStore;

type FindingTuple<'py> = (usize, Bound<'py, PyAny>, &'static str, Vec<String>, Option<usize>);

/// The facts of a list being read: per message its kind and the end of its ids, and the id
/// objects themselves (kept alive so their text can be borrowed for the scan).
#[derive(Default)]
struct ListFacts<'py> {
    messages: Vec<(Kind, usize)>,
    ids: Vec<Option<Bound<'py, PyString>>>,
}

impl<'py> ListFacts<'py> {
    fn push_id(&mut self, id: Option<Bound<'py, PyAny>>) {
        self.ids.push(id.and_then(|v| v.cast_into::<PyString>().ok()));
    }

    fn finish(&mut self, kind: Kind) {
        self.messages.push((kind, self.ids.len()));
    }

    /// Push the `key` of each dict block of type `kind` in a list content; returns whether such a
    /// block comes after a block of another type.
    fn block_ids(
        &mut self,
        content: Option<Bound<'py, PyAny>>,
        kind: &str,
        key: &Bound<'py, PyString>,
    ) -> PyResult<bool> {
        let Some(blocks) = content.and_then(|c| c.cast_into::<PyList>().ok()) else {
            return Ok(false);
        };
        let py = blocks.py();
        let (mut other, mut late) = (false, false);
        for block in blocks.iter() {
            let of_kind = match block.cast::<PyDict>() {
                Ok(block) => {
                    let is_kind = block
                        .get_item(intern!(py, "type"))?
                        .is_some_and(|t| t.cast::<PyString>().is_ok_and(|t| t.to_str().is_ok_and(|t| t == kind)));
                    if is_kind {
                        self.push_id(block.get_item(key)?);
                    }
                    is_kind
                }
                Err(_) => false,
            };
            late |= of_kind && other;
            other |= !of_kind;
        }
        Ok(late)
    }

    /// Read one message (`messages[i]`, a dict or an SDK object taken as its dump); returns the
    /// role it is reported under (a Responses API item without a role: the role it is indexed under).
    fn push_message(&mut self, i: usize, message: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
        let py = message.py();
        let path = || format!("messages[{i}]");
        let dict = if let Ok(dict) = message.cast::<PyDict>() {
            dict.clone()
        } else {
            let dump = dumped(message)?.and_then(|d| d.cast_into::<PyDict>().ok());
            let Some(dict) = dump else {
                let got = type_name(message);
                return Err(Error::message(path(), format!("a message must be a dict, got {got}")).into());
            };
            dict
        };
        let item_type = dict
            .get_item(intern!(py, "type"))?
            .and_then(|t| t.cast_into::<PyString>().ok())
            .filter(|t| t.to_str().is_ok_and(|t| t != "message"));
        let role = dict.get_item(intern!(py, "role"))?;
        if let Some(item_type) = item_type {
            let item_type = item_type.to_str()?;
            let call_id = dict.get_item(intern!(py, "call_id"))?.filter(|c| !c.is_none());
            let kind = pairs::item_kind(item_type, call_id.is_some());
            if matches!(kind, Kind::ItemCall | Kind::ItemOutput) {
                self.push_id(call_id);
            }
            self.finish(kind);
            return Ok(match role.and_then(|r| r.cast_into::<PyString>().ok()) {
                Some(role) => role,
                None => PyString::new(py, message::item_role(item_type).as_str()),
            });
        }
        let Some(role) = role else {
            return Err(Error::message(format!("{}.role", path()), "missing: every message needs a role").into());
        };
        let role = role.cast_into::<PyString>().map_err(|e| {
            Error::message(
                format!("{}.role", path()),
                format!("must be a str, got {}", type_name(e.into_inner().as_any())),
            )
        })?;
        let name = role.to_str().map_err(|_| {
            Error::message(
                format!("{}.role", path()),
                "str is not valid Unicode (it holds a lone surrogate)",
            )
        })?;
        match name {
            "assistant" => {
                if let Some(calls) = dict.get_item(intern!(py, "tool_calls"))?
                    && !calls.is_none()
                {
                    match calls.cast::<PyList>() {
                        Ok(calls) => {
                            for call in calls.iter() {
                                let id = match call.cast::<PyDict>() {
                                    Ok(call) => call.get_item(intern!(py, "id"))?,
                                    Err(_) => None,
                                };
                                self.push_id(id);
                            }
                        }
                        // Not a list of calls: a call that no result can answer.
                        Err(_) => self.push_id(None),
                    }
                }
                self.block_ids(dict.get_item(intern!(py, "content"))?, "tool_use", intern!(py, "id"))?;
                self.finish(Kind::Calls);
            }
            "tool" => {
                self.push_id(dict.get_item(intern!(py, "tool_call_id"))?);
                self.finish(Kind::ToolResult);
            }
            "user" => {
                let content = dict.get_item(intern!(py, "content"))?;
                let late = self.block_ids(content, "tool_result", intern!(py, "tool_use_id"))?;
                self.finish(if late {
                    Kind::LateBlockResults
                } else {
                    Kind::BlockResults
                });
            }
            _ => self.finish(Kind::Other),
        }
        Ok(role)
    }

    /// The core's facts, borrowing the id texts.
    fn facts(&self) -> Facts<'_> {
        let mut facts = Facts::with_capacity(self.messages.len());
        let mut k = 0;
        for &(kind, end) in &self.messages {
            for id in &self.ids[k..end] {
                // A str that is not valid Unicode (a lone surrogate) cannot be compared as text:
                // taken as no id, so whatever it belongs to is removed rather than mispaired.
                facts.push_id(id.as_ref().and_then(|s| s.to_str().ok()));
            }
            k = end;
            facts.finish(kind);
        }
        facts
    }
}

/// What the sanitizer would remove from a list (or tuple) of message dicts, in order. Reads only
/// `role`, `tool_calls[*].id`, `tool_call_id` and the `type`/`id`/`tool_use_id` of content blocks;
/// raises `InvalidMessageError` for an item that is not a dict or has no str role. O(n).
#[pyfunction]
pub fn scan_list<'py>(messages: &Bound<'py, PyAny>) -> PyResult<Vec<FindingTuple<'py>>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(list) = messages.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = messages.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(Error::message(
            "messages",
            format!("expected a list of message dicts, got {}", type_name(messages)),
        )
        .into());
    };
    let mut list = ListFacts {
        messages: Vec::with_capacity(items.len()),
        ids: Vec::with_capacity(items.len()),
    };
    let mut roles = Vec::with_capacity(items.len());
    for (i, message) in items.iter().enumerate() {
        roles.push(list.push_message(i, message)?);
    }
    pairs::scan(&list.facts())
        .iter()
        .map(|r| {
            let f = Finding::new(r);
            Ok((f.index, roles[r.index].clone().into_any(), f.code, f.ids, f.other))
        })
        .collect()
}

fn finding_tuple(py: Python<'_>, (f, role): (Finding, Role)) -> FindingTuple<'_> {
    let role = PyString::new(py, role.as_str()).into_any();
    (f.index, role, f.code, f.ids, f.other)
}

/// What the sanitizer would remove from the store's visible messages. O(n), GIL released.
#[pyfunction]
pub fn scan_store<'py>(py: Python<'py>, store: &MessageStore) -> Vec<FindingTuple<'py>> {
    let findings = py.detach(|| store.inner.read().pair_findings());
    findings.into_iter().map(|f| finding_tuple(py, f)).collect()
}

/// Remove what the scan finds from the store's visible messages as a new batch (none opens when
/// nothing is found); returns the findings (positions before the call) and the visible messages
/// after it, as a view decoded on demand. O(n), GIL released.
#[pyfunction]
pub fn sanitize_store<'py>(
    py: Python<'py>,
    store: Bound<'py, MessageStore>,
    description: String,
) -> (Vec<FindingTuple<'py>>, MessageView) {
    let shared = store.get();
    let (findings, visible) = py.detach(|| {
        let mut inner = shared.inner.write();
        let findings = inner.sanitize(description);
        (findings, inner.visible().clone())
    });
    let view = MessageView {
        store: store.unbind(),
        ids: visible,
    };
    (findings.into_iter().map(|f| finding_tuple(py, f)).collect(), view)
}

/// Stored messages in a fixed order: the visible list of a store at one moment. Holding one
/// costs O(1) (the order is shared copy-on-write); messages are decoded when asked for.
#[pyclass(frozen, module = "memci._core", name = "MessageView")]
pub struct MessageView {
    store: Py<MessageStore>,
    ids: CowVec<NodeId>,
}

#[pymethods]
impl MessageView {
    fn __len__(&self) -> usize {
        self.ids.len()
    }

    /// The messages as fresh dicts, in order. O(n).
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let shared = self.store.get();
        let store = shared.read(py);
        shared.decode(py, &store, self.ids.iter().copied())
    }
}
