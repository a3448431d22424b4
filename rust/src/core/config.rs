//! What an operation is asked to do, as plain Rust values: the roles a query or a config names, the
//! strategy and the encoding of a trim, and the configs of TRUNCATE ([`Cuts`]), FILTER
//! ([`Conditions`]) and TRIM TO TOKENS ([`Budget`]). A value of these types is valid by
//! construction: the binding builds them from `memci.ops` configs and arguments (one conversion
//! per type, in `python/config.rs`), and the core never checks them again.

use std::ops::Range;

pub use crate::core::roles::Role;
pub use crate::core::tokens::Encoding;
pub use crate::core::turns::Thinking;

/// Which end of the history a trim keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Keep the first messages that fit.
    First,
    /// Keep the last messages that fit.
    Last,
}

impl Strategy {
    /// `"first"` or `"last"`; anything else is `None`.
    pub fn parse(name: &str) -> Option<Strategy> {
        match name {
            "first" => Some(Strategy::First),
            "last" => Some(Strategy::Last),
            _ => None,
        }
    }
}

/// A set of roles (empty: not given).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Roles(u8);

impl Roles {
    pub fn of(roles: &[Role]) -> Self {
        Self(roles.iter().fold(0, |bits, r| bits | 1 << (*r as u8)))
    }

    pub fn has(self, role: Role) -> bool {
        self.0 & (1 << (role as u8)) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The roles in the set, in [`Role::ALL`] order.
    pub fn to_vec(self) -> Vec<Role> {
        Role::ALL.into_iter().filter(|&r| self.has(r)).collect()
    }
}

/// The cuts of a TRUNCATE, applied in field order.
#[derive(Debug, Default, Clone)]
pub struct Cuts {
    pub keep_first: Option<usize>,
    pub keep_last: Option<usize>,
    pub remove_first: Option<usize>,
    pub remove_last: Option<usize>,
    pub range: Option<(usize, usize)>,
    pub role: Option<Role>,
}

impl Cuts {
    /// The window `lo..hi` of a list of `len` items that the cuts keep.
    pub fn window(&self, len: usize) -> Range<usize> {
        let (mut lo, mut hi) = (0, len);
        if let Some(n) = self.keep_first {
            hi = hi.min(lo + n);
        }
        if let Some(n) = self.keep_last {
            lo = lo.max(hi.saturating_sub(n));
        }
        if let Some(n) = self.remove_first {
            lo = hi.min(lo + n);
        }
        if let Some(n) = self.remove_last {
            hi = lo.max(hi.saturating_sub(n));
        }
        if let Some((start, end)) = self.range {
            let new_lo = hi.min(lo + start);
            hi = new_lo.max(hi.min(lo + end));
            lo = new_lo;
        }
        lo..hi
    }

    pub fn is_empty(&self) -> bool {
        self.keep_first.is_none()
            && self.keep_last.is_none()
            && self.remove_first.is_none()
            && self.remove_last.is_none()
            && self.range.is_none()
            && self.role.is_none()
    }
}

/// The conditions of a FILTER; an empty list means "not given".
#[derive(Debug, Default, Clone)]
pub struct Conditions {
    pub roles: Vec<Role>,
    pub contains: Vec<String>,
    pub excludes: Vec<String>,
}

/// What a TRIM TO TOKENS is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_tokens: u64,
    pub strategy: Strategy,
    /// Keep the leading system/developer messages whatever they cost.
    pub keep_system: bool,
    /// `Last` only: the kept tail must start on one of these roles (whole units are dropped from
    /// its old end until it does).
    pub start_on: Roles,
    /// The kept messages must end on one of these roles (`Last`: whole units are dropped from the
    /// end of the history first; `First`: from the end of the kept head).
    pub end_on: Roles,
    pub allow_partial: bool,
    /// The encoding the counts are taken in (a caller's own counter replaces it).
    pub encoding: Encoding,
    /// `Last` only: cut with hysteresis. When the history passes `max_tokens` (the high-water
    /// mark), the trim keeps what fits this many tokens (the low-water mark) instead, so that the
    /// window can grow append-only until it passes the mark again (see [`crate::core::trim::plan`]).
    pub low_water: Option<u64>,
    /// Whether the thinking of turns before the kept history's current one counts
    /// ([`Thinking::DropEarlier`]: it does not, as in `token_count`). Part of the budget so that
    /// every trim of one config (`MessageArray`, a batch step) counts the same.
    pub thinking: Thinking,
}

/// The budget `trim_to_tokens(max_tokens, encoding=...)` means with every other option left at
/// its default (the newest messages, system kept, starting on a user message), for the core's
/// tests.
#[cfg(test)]
impl Budget {
    pub fn defaults(max_tokens: u64, encoding: Encoding) -> Self {
        Self {
            max_tokens,
            strategy: Strategy::Last,
            keep_system: true,
            start_on: Roles::of(&[Role::User]),
            end_on: Roles::default(),
            allow_partial: false,
            encoding,
            low_water: None,
            thinking: Thinking::DropEarlier,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_cuts_compose_like_slices_in_field_order() {
        let cuts = Cuts {
            keep_last: Some(6),
            remove_first: Some(1),
            range: Some((1, 3)),
            ..Cuts::default()
        };
        assert_eq!(cuts.window(10), 6..8);
        let only = |cuts: Cuts| cuts.window(5);
        assert_eq!(
            only(Cuts {
                keep_last: Some(0),
                ..Cuts::default()
            }),
            5..5
        );
        assert_eq!(
            only(Cuts {
                remove_last: Some(9),
                ..Cuts::default()
            }),
            0..0
        );
        assert_eq!(
            only(Cuts {
                range: Some((4, 2)),
                ..Cuts::default()
            }),
            4..4
        );
    }

    #[test]
    fn a_role_set_holds_each_role_once_in_canonical_order() {
        let set = Roles::of(&[Role::Tool, Role::User, Role::Tool]);
        assert_eq!(set.to_vec(), [Role::User, Role::Tool]);
        assert!(set.has(Role::User) && !set.has(Role::System));
        assert!(Roles::default().is_empty());
        assert_eq!(Strategy::parse("last"), Some(Strategy::Last));
        assert_eq!(Strategy::parse("Last"), None);
    }
}
