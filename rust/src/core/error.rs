//! The core's one error type. The binding maps each variant to a `memci.errors` class.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A message or a value inside it is not acceptable; `path` names the place
    /// (`messages[3].tool_calls[0].function`).
    InvalidMessage { path: String, reason: String },
    /// An operation or query argument is not valid.
    InvalidOperation(String),
    /// A batch index that does not exist.
    Batch(String),
    /// A position outside the visible messages.
    Position(String),
    /// A saved state that cannot be loaded.
    State(String),
}

impl Error {
    pub fn message(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidMessage {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidMessage { path, reason } => write!(f, "{path}: {reason}"),
            Error::InvalidOperation(m) | Error::Batch(m) | Error::Position(m) | Error::State(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Longer texts are cut to this many characters where an error quotes them.
const QUOTED_CHARS: usize = 80;

/// `text` quoted for an error (`"bot"`), cut with `…` when longer than 80 characters: an error
/// names what was given, it need not repeat a megabyte of it.
pub fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}
