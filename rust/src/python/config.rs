//! The one conversion of each config value from Python, and the one wording of each fault.
//!
//! [`Role`], [`Strategy`] and [`Encoding`] convert with `FromPyObject`; a list of roles (or one
//! role name) with [`roles`]; the configs of `memci.ops` are read straight from their attributes
//! ([`Operation`]). The `memci.ops` configs check the shape of their fields when they are built
//! (counts, flags, lists of str, and the role names of `Truncate.role` and `Filter.roles`); the
//! names a config does not check (`TrimToTokens.start_on`, `end_on`, `encoding`) and every
//! role, strategy or encoding given to a method are checked here, once. A fault is worded the
//! same wherever it comes from, named by its place (`"by_role: role"`):
//!
//! - `{place} must be a str, got {value!r}`;
//! - `{place}: unknown role 'bot'; expected one of system, developer, user, assistant, tool`;
//! - `{place}: unknown encoding "nope": expected o200k_base, cl100k_base, approximate or ...`;
//! - `{place} must be 'first' or 'last', got {value!r}`;
//! - `{place} is not valid Unicode: it holds a lone surrogate at index 3`.
//!
//! Every other argument a method takes from Python is converted here too, never by the argument
//! extraction the binding generates (whose `OverflowError`, `UnicodeEncodeError` and `TypeError`
//! are not of the `memci.MemciError` family): a str ([`string`], [`strings`]), a count (any int,
//! saturated: [`count`]), an index ([`index`]: one beyond `i64` is out of range, as given), a page
//! index ([`page`]) and a time bound ([`seconds`]).
//! Values are shown short ([`shown`]): an int too long to print by its size, a long repr cut.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBool, PyInt, PyList, PyString, PyTuple};

use crate::core::config::{Budget, Conditions, Cuts, Encoding, Role, Roles, Strategy};
use crate::core::error::Error;
use crate::core::store::Incoming;
use crate::core::turns::Thinking;
use crate::python::convert::incoming;

/// What is wrong with a value, before it is known where the value came from.
#[derive(Debug)]
pub enum Fault {
    /// The value is not of the expected kind: what it must be, and its repr.
    Kind { expected: &'static str, got: String },
    /// The value is of the right kind but not a known one.
    Unknown(String),
    /// A str holding a lone surrogate at this index (it has no UTF-8 form).
    NotUnicode(usize),
}

impl Fault {
    /// The error naming `place` (`"recent: role"`).
    pub fn at(self, place: &str) -> Error {
        Error::InvalidOperation(match self {
            Fault::Kind { expected, got } => format!("{place} must be {expected}, got {got}"),
            Fault::Unknown(text) => format!("{place}: {text}"),
            Fault::NotUnicode(at) => {
                format!("{place} is not valid Unicode: it holds a lone surrogate at index {at}")
            }
        })
    }

    fn kind(expected: &'static str, obj: Borrowed<'_, '_, PyAny>) -> Self {
        Fault::Kind {
            expected,
            got: shown(&obj),
        }
    }
}

impl From<Fault> for PyErr {
    fn from(fault: Fault) -> PyErr {
        fault.at("value").into()
    }
}

/// Longer reprs are cut to this many characters in an error.
const SHOWN_CHARS: usize = 80;

/// `repr(obj)` for an error, never failing: an int too long to print (Python refuses over
/// 4,300 digits) as its size in bits, a repr over [`SHOWN_CHARS`] cut with `…`, `"?"` if its
/// `__repr__` raises.
pub fn shown(obj: &Bound<'_, PyAny>) -> String {
    if let Ok(int) = obj.cast::<PyInt>()
        && !obj.is_instance_of::<PyBool>()
        && let Ok(bits) = int.call_method0("bit_length").and_then(|b| b.extract::<u64>())
        && bits > 1024
    {
        let sign = if int.lt(0).unwrap_or(false) { "a negative" } else { "an" };
        return format!("{sign} integer of {bits} bits");
    }
    let text = obj
        .repr()
        .map_or_else(|_| "?".into(), |r| r.to_string_lossy().into_owned());
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// `obj` as a `T`, a fault named by `place`.
pub fn named<'py, T>(obj: &Bound<'py, PyAny>, place: &str) -> Result<T, Error>
where
    T: for<'a> FromPyObject<'a, 'py, Error = Fault>,
{
    obj.extract::<T>().map_err(|fault| fault.at(place))
}

/// `obj` as a `T` when it is not None.
pub fn optional<'py, T>(obj: Option<&Bound<'py, PyAny>>, place: &str) -> Result<Option<T>, Error>
where
    T: for<'a> FromPyObject<'a, 'py, Error = Fault>,
{
    obj.filter(|o| !o.is_none()).map(|o| named(o, place)).transpose()
}

/// The text of a str (a `StrEnum` member too), or the fault for anything else (a str holding a
/// lone surrogate too, which has no UTF-8 text).
fn text(obj: Borrowed<'_, '_, PyAny>) -> Result<PyBackedStr, Fault> {
    let s = obj.cast::<PyString>().map_err(|_| Fault::kind("a str", obj))?;
    PyBackedStr::try_from(s.to_owned()).map_err(|err| {
        let at = err.value(obj.py()).getattr("start").and_then(|a| a.extract::<usize>());
        Fault::NotUnicode(at.unwrap_or(0))
    })
}

/// A str argument's text, the fault named by `place` (not a str; a lone surrogate).
pub fn string(obj: &Bound<'_, PyAny>, place: &str) -> Result<PyBackedStr, Error> {
    text(obj.as_borrowed()).map_err(|fault| fault.at(place))
}

/// A list or tuple of str (a bare str is a list of one; None: not given), each item named
/// `{place}[i]`.
pub fn strings(obj: &Bound<'_, PyAny>, place: &str) -> Result<Vec<PyBackedStr>, Error> {
    if obj.is_none() {
        return Ok(Vec::new());
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(vec![string(obj, place)?]);
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = obj.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(Fault::kind("a list of str", obj.as_borrowed()).at(place));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| string(item, &format!("{place}[{i}]")))
        .collect()
}

/// The roles, as Python lists them.
const ROLE_NAMES: &str = "system, developer, user, assistant, tool";

impl<'a, 'py> FromPyObject<'a, 'py> for Role {
    type Error = Fault;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Fault> {
        let name = text(obj)?;
        Role::parse(&name).ok_or_else(|| {
            // The repr of the plain str, as Python shows it (a StrEnum member's value too).
            let shown = shown(&PyString::new(obj.py(), &name));
            Fault::Unknown(format!("unknown role {shown}; expected one of {ROLE_NAMES}"))
        })
    }
}

/// One of a few names, read by `parse`; `expected` lists them in the error.
fn one_of<T>(obj: Borrowed<'_, '_, PyAny>, parse: fn(&str) -> Option<T>, expected: &'static str) -> Result<T, Fault> {
    text(obj)
        .ok()
        .and_then(|name| parse(&name))
        .ok_or_else(|| Fault::kind(expected, obj))
}

impl<'a, 'py> FromPyObject<'a, 'py> for Strategy {
    type Error = Fault;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Fault> {
        one_of(obj, Strategy::parse, "'first' or 'last'")
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Thinking {
    type Error = Fault;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Fault> {
        one_of(obj, Thinking::parse, "'drop_earlier' or 'count'")
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Encoding {
    type Error = Fault;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> Result<Self, Fault> {
        let name = text(obj)?;
        Encoding::parse(&name).map_err(|e| Fault::Unknown(e.to_string()))
    }
}

/// LangChain's message types, accepted for the roles a trim starts and ends on.
fn langchain_alias(item: &Bound<'_, PyAny>) -> Option<Role> {
    match item.cast::<PyString>().ok()?.to_str().ok()? {
        "human" => Some(Role::User),
        "ai" => Some(Role::Assistant),
        _ => None,
    }
}

/// Roles given as one role name or any iterable of them (None: not given; each role counted
/// once). `aliases`: LangChain's `human` and `ai` are `user` and `assistant`. An item is named
/// `{place}[i]`, a bare name too (it is a list of one).
pub fn roles(obj: Option<&Bound<'_, PyAny>>, place: &str, aliases: bool) -> Result<Vec<Role>, Error> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Vec::new());
    };
    let items: Vec<Bound<'_, PyAny>> = if obj.is_instance_of::<PyString>() {
        vec![obj.clone()]
    } else {
        let not_a_list = || Fault::kind("a role or a list of roles", obj.as_borrowed()).at(place);
        if obj.is_instance_of::<pyo3::types::PyBytes>() || obj.is_instance_of::<pyo3::types::PyDict>() {
            return Err(not_a_list());
        }
        let iter = obj.try_iter().map_err(|_| not_a_list())?;
        iter.collect::<PyResult<_>>().map_err(|_| not_a_list())?
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let role = match aliases.then(|| langchain_alias(item)).flatten() {
            Some(role) => role,
            None => named::<Role>(item, &format!("{place}[{i}]"))?,
        };
        if !out.contains(&role) {
            out.push(role);
        }
    }
    Ok(out)
}

/// A count or position: any Python int, saturated to the `usize` range (a count larger than any
/// array acts like a large count). `memci.ops` refuses negatives and non-ints; so does this.
pub fn count(obj: &Bound<'_, PyAny>, place: &str) -> Result<usize, Error> {
    let refused = || Fault::kind("a non-negative int", obj.as_borrowed()).at(place);
    if obj.is_instance_of::<PyBool>() {
        return Err(refused());
    }
    if let Ok(v) = obj.extract::<usize>() {
        return Ok(v);
    }
    let int = obj.cast::<PyInt>().map_err(|_| refused())?;
    if int.lt(0).unwrap_or(true) {
        return Err(refused());
    }
    Ok(usize::MAX)
}

/// An index that may count from the end: any Python int within `i64`. One beyond it is out of
/// range for any array (none holds 2**63 messages or batches): refused with `beyond` (the
/// position or batch error), the int shown as given.
pub fn index(obj: &Bound<'_, PyAny>, place: &str, beyond: fn(String) -> Error) -> Result<i64, Error> {
    let refused = || Fault::kind("an int", obj.as_borrowed()).at(place);
    if obj.is_instance_of::<PyBool>() {
        return Err(refused());
    }
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(v);
    }
    obj.cast::<PyInt>().map_err(|_| refused())?;
    Err(beyond(format!("{place}: {} is out of range", shown(obj))))
}

/// A page index: an int from 1 to `u64::MAX`; the fault names `place` and shows the value.
pub fn page(obj: &Bound<'_, PyAny>, place: &str) -> Result<u64, Error> {
    if !obj.is_instance_of::<PyBool>()
        && let Ok(v) = obj.extract::<u64>()
        && v >= 1
    {
        return Ok(v);
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return Err(Error::InvalidOperation(format!(
            "{place}: page {} does not exist: page indices are 1 to 2**64 - 1",
            shown(obj)
        )));
    }
    Err(Fault::kind("an int", obj.as_borrowed()).at(place))
}

/// A time bound in epoch seconds: any real number but NaN (an int too large for a float is
/// the infinity of its sign, beyond every timestamp); None: unbounded.
pub fn seconds(obj: Option<&Bound<'_, PyAny>>, place: &str) -> Result<Option<f64>, Error> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let refused = || Fault::kind("a number of seconds or None", obj.as_borrowed()).at(place);
    if obj.is_instance_of::<PyBool>() {
        return Err(refused());
    }
    match obj.extract::<f64>() {
        Ok(v) if v.is_nan() => Err(refused()),
        Ok(v) => Ok(Some(v)),
        Err(_) => {
            let int = obj.cast::<PyInt>().map_err(|_| refused())?;
            Ok(Some(if int.lt(0).unwrap_or(false) {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }))
        }
    }
}

/// A bool field.
fn flag(obj: &Bound<'_, PyAny>, place: &str) -> Result<bool, Error> {
    obj.cast::<PyBool>()
        .map(pyo3::types::PyBoolMethods::is_true)
        .map_err(|_| Fault::kind("a bool", obj.as_borrowed()).at(place))
}

/// The low-water mark in tokens of a `TrimToTokens` config: `low_water` (None, or a fraction in
/// (0, 1] that `memci.ops` has checked) of `max_tokens`, rounded down.
fn low_water(fraction: &Bound<'_, PyAny>, max_tokens: &Bound<'_, PyAny>, place: &str) -> Result<Option<u64>, Error> {
    if fraction.is_none() {
        return Ok(None);
    }
    let share: f64 = fraction
        .extract()
        .map_err(|_| Fault::kind("a float in (0, 1]", fraction.as_borrowed()).at(place))?;
    let max = count(max_tokens, place)? as u64;
    // An f64 holds a budget exactly up to 2^53 tokens; beyond that, the mark is as near as it gets.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    Ok(Some(((max as f64) * share.clamp(0.0, 1.0)).floor() as u64))
}

/// A list of str as owned strings (see [`strings`]).
fn owned_strings(obj: &Bound<'_, PyAny>, place: &str) -> Result<Vec<String>, Error> {
    Ok(strings(obj, place)?.iter().map(|s| String::from(&**s)).collect())
}

/// An operation config of `memci.ops`, read from its attributes (its `name` says which it is).
pub enum Operation {
    Append(Incoming),
    Insert { position: usize, messages: Incoming },
    Replace { index: i64, message: Incoming },
    Truncate(Cuts),
    Clear { keep_system: bool },
    Filter(Conditions),
    Rollback { batch_index: i64 },
    Checkpoint,
    TrimToTokens(Budget),
}

/// An operation and the text its batch snapshot carries (its `describe()`).
pub struct Described {
    pub operation: Operation,
    pub description: String,
}

impl Described {
    /// Read a `memci.ops` config. O(size of its messages).
    pub fn of(op: &Bound<'_, PyAny>) -> PyResult<Self> {
        let name: String = op.getattr("name")?.extract()?;
        let field = |f: &str| op.getattr(f);
        let place = |f: &str| format!("{name}: {f}");
        let operation = match name.as_str() {
            "append" => Operation::Append(incoming(&field("messages")?)?),
            "insert" => Operation::Insert {
                position: count(&field("position")?, &place("position"))?,
                messages: incoming(&field("messages")?)?,
            },
            "replace" => {
                let message = incoming(&field("message")?)?;
                if message.len() != 1 {
                    return Err(Error::message("message", "replace takes exactly one message dict").into());
                }
                Operation::Replace {
                    index: index(&field("index")?, &place("index"), Error::Position)?,
                    message,
                }
            }
            "truncate" => {
                let cut = |f: &str| -> PyResult<Option<usize>> {
                    let value = field(f)?;
                    Ok(if value.is_none() {
                        None
                    } else {
                        Some(count(&value, &place(f))?)
                    })
                };
                let range = field("range")?;
                Operation::Truncate(Cuts {
                    keep_first: cut("keep_first")?,
                    keep_last: cut("keep_last")?,
                    remove_first: cut("remove_first")?,
                    remove_last: cut("remove_last")?,
                    range: if range.is_none() {
                        None
                    } else {
                        let (start, end): (Bound<'_, PyAny>, Bound<'_, PyAny>) = range.extract()?;
                        Some((count(&start, &place("range.start"))?, count(&end, &place("range.end"))?))
                    },
                    role: optional(Some(&field("role")?), &place("role"))?,
                })
            }
            "clear" => Operation::Clear {
                keep_system: flag(&field("keep_system")?, &place("keep_system"))?,
            },
            "filter" => Operation::Filter(Conditions {
                roles: roles(Some(&field("roles")?), &place("roles"), false)?,
                contains: owned_strings(&field("content_contains")?, &place("content_contains"))?,
                excludes: owned_strings(&field("content_excludes")?, &place("content_excludes"))?,
            }),
            "rollback" => Operation::Rollback {
                batch_index: index(&field("batch_index")?, &place("batch_index"), Error::Batch)?,
            },
            "checkpoint" => Operation::Checkpoint,
            "trim_to_tokens" => Operation::TrimToTokens(Budget {
                max_tokens: count(&field("max_tokens")?, &place("max_tokens"))? as u64,
                strategy: named(&field("strategy")?, &place("strategy"))?,
                keep_system: flag(&field("keep_system")?, &place("keep_system"))?,
                start_on: Roles::of(&roles(Some(&field("start_on")?), &place("start_on"), true)?),
                end_on: Roles::of(&roles(Some(&field("end_on")?), &place("end_on"), true)?),
                allow_partial: flag(&field("allow_partial")?, &place("allow_partial"))?,
                encoding: named(&field("encoding")?, &place("encoding"))?,
                low_water: low_water(&field("low_water")?, &field("max_tokens")?, &place("low_water"))?,
                thinking: named(&field("thinking")?, &place("thinking"))?,
            }),
            other => {
                return Err(Error::InvalidOperation(format!("{other}: not an operation the store runs")).into());
            }
        };
        let description = String::from(&*string(&op.call_method0("describe")?, &place("description"))?);
        Ok(Self { operation, description })
    }
}
