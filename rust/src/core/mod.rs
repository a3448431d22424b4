//! The PyO3-free core: everything here is plain Rust, tested with `cargo test`, and usable
//! without the GIL.

pub mod arena;
pub mod attp;
pub mod batch;
pub mod bpe_tables;
pub mod config;
pub mod cow_vec;
pub mod edits;
pub mod error;
pub mod hybrid;
pub mod message;
pub mod model_names;
pub mod pages;
pub mod pair_index;
pub mod pairs;
pub mod piece_counts;
pub mod roles;
pub mod sanitize;
pub mod search;
pub mod search_terms;
pub mod snapshot;
pub mod stem;
pub mod store;
#[cfg(test)]
pub mod test_random;
pub mod text;
pub mod token_counts;
pub mod tokens;
pub mod trim;
pub mod turns;
pub mod value;
