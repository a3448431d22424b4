//! `MessageStore.edit`: read a context edit of `memci.ops` (`ClearToolUses`, `ClearThinking`)
//! from its attributes, then plan and apply it in the core with the GIL released.

use pyo3::prelude::*;

use crate::core::edits::{ClearThinking, ClearToolUses, DEFAULT_PLACEHOLDER, Plan};
use crate::core::error::Error;
use crate::core::store::Store;
use crate::python::config::{count, named, string, strings};

/// A context edit of `memci.ops`, and the text its batch snapshot carries.
pub enum Edit {
    ToolUses(ClearToolUses),
    Thinking(ClearThinking),
}

impl Edit {
    /// Read a checked `memci.ops` edit config. O(its fields).
    pub fn of(op: &Bound<'_, PyAny>) -> PyResult<(Self, String)> {
        let name: String = op.getattr("name")?.extract()?;
        let field = |f: &str| op.getattr(f);
        let place = |f: &str| format!("{name}: {f}");
        let optional_count = |f: &str| -> PyResult<Option<u64>> {
            let value = field(f)?;
            Ok(if value.is_none() {
                None
            } else {
                Some(count(&value, &place(f))? as u64)
            })
        };
        let edit = match name.as_str() {
            "clear_tool_uses" => {
                let placeholder = field("placeholder")?;
                Edit::ToolUses(ClearToolUses {
                    trigger: optional_count("trigger")?,
                    keep: count(&field("keep")?, &place("keep"))?,
                    clear_at_least: optional_count("clear_at_least")?.unwrap_or(0),
                    exclude_tools: strings(&field("exclude_tools")?, &place("exclude_tools"))?
                        .iter()
                        .map(|s| String::from(&**s))
                        .collect(),
                    clear_tool_inputs: field("clear_tool_inputs")?.is_truthy()?,
                    placeholder: if placeholder.is_none() {
                        DEFAULT_PLACEHOLDER.to_owned()
                    } else {
                        String::from(&*string(&placeholder, &place("placeholder"))?)
                    },
                    encoding: named(&field("encoding")?, &place("encoding"))?,
                    thinking: named(&field("thinking")?, &place("thinking"))?,
                })
            }
            "clear_thinking" => Edit::Thinking(ClearThinking {
                keep_turns: count(&field("keep_turns")?, &place("keep_turns"))?,
                encoding: named(&field("encoding")?, &place("encoding"))?,
                thinking: named(&field("thinking")?, &place("thinking"))?,
            }),
            other => return Err(Error::InvalidOperation(format!("{other}: not a context edit")).into()),
        };
        let description = String::from(&*string(&op.call_method0("describe")?, &place("description"))?);
        Ok((edit, description))
    }

    /// Plan and apply the edit on `store`.
    pub fn run(&self, store: &mut Store, description: String) -> Plan {
        match self {
            Edit::ToolUses(edit) => store.clear_tool_uses(edit, description),
            Edit::Thinking(edit) => store.clear_thinking(edit, description),
        }
    }
}
