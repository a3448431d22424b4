//! Exact counting with a memory of recent pieces.
//!
//! An exact count splits a text into pieces with the encoding's pre-tokenizing pattern (words,
//! a word's leading space, runs of digits or punctuation), then byte-pair encodes each piece on
//! its own: a piece's count depends on its bytes alone. Natural text repeats its pieces (" the",
//! " of", "\n\n"), and encoding one costs far more than recognising it: `bpe`'s backtracking
//! encoder allocates two buffers and walks an automaton for every piece. So each thread keeps,
//! per encoding, a table of [`SETS`] sets of the two pieces last seen there (one cache line): a
//! hit (same length, same bytes) is the count, a miss encodes and replaces the older piece. Pieces longer
//! than [`SHORT`] bytes are rare and always encoded.
//!
//! The pieces come from [`Splitter`], the same patterns searched with the thread's own regex
//! cache, kept here beside the table.
//!
//! The table is an answer cache of a pure function, so counts are identical with or without it
//! (`tokens::tests` checks this over long mixed texts, and the Python suite checks every count
//! against tiktoken). It costs 256 KiB per thread per exact encoding, allocated at the thread's
//! first exact count.

use std::cell::RefCell;

use bpe_openai::Tokenizer;

use crate::core::bpe_tables::Splitter;

/// Sets in one table (a power of two), of two slots each: one cache line.
const SETS: usize = 1 << 12;
/// The longest piece a slot holds.
const SHORT: usize = 30;
/// Exact encodings with a table (`Encoding::index` of `o200k_base` and `cl100k_base`).
const TABLES: usize = 2;
/// The last word of a slot without its count byte.
const KEY_MASK: u64 = !(0xFF << 56);

/// A remembered piece, as four words: the piece's bytes zero-padded to 30, its length (byte 30)
/// and its count (byte 31). All zero is an empty slot (a piece is never empty).
type Slot = [u64; 4];

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Set([Slot; 2]);

/// What a thread keeps for one encoding: its pieces' counts and its regex search cache.
struct Memory {
    sets: Box<[Set]>,
    search: regex_automata::meta::Cache,
}

thread_local! {
    static MEMORIES: RefCell<[Option<Memory>; TABLES]> = const { RefCell::new([None, None]) };
}

/// The key of a short piece: its slot with a zero count.
fn key_of(piece: &[u8]) -> Slot {
    let mut bytes = [0u8; 32];
    bytes[..piece.len()].copy_from_slice(piece);
    bytes[SHORT] = piece.len() as u8;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    [word(0), word(1), word(2), word(3)]
}

fn set_of(key: &Slot) -> usize {
    let mixed = (key[0] ^ key[1].rotate_left(21) ^ key[2].rotate_left(42) ^ key[3].rotate_left(7))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - SETS.trailing_zeros())) as usize
}

fn holds(slot: &Slot, key: &Slot) -> bool {
    (slot[0] ^ key[0]) | (slot[1] ^ key[1]) | (slot[2] ^ key[2]) | ((slot[3] ^ key[3]) & KEY_MASK) == 0
}

/// The exact token count of `text` with `tokenizer` and its `splitter`, whose table is `table`
/// (below [`TABLES`]). Text is not normalised: both OpenAI encodings count the text as given.
/// O(len).
pub fn count(tokenizer: &Tokenizer, splitter: &Splitter, table: usize, text: &str) -> usize {
    MEMORIES.with(|memories| {
        let Ok(mut memories) = memories.try_borrow_mut() else {
            return uncached(tokenizer, text); // not reentrant in practice; never panic if it were
        };
        let Memory { sets, search } = memories[table].get_or_insert_with(|| Memory {
            sets: vec![Set([[0; 4]; 2]); SETS].into_boxed_slice(),
            search: splitter.cache(),
        });
        let mut total = 0;
        splitter.each_piece(search, text, |piece| {
            total += piece_count(tokenizer, sets, piece.as_bytes());
        });
        total
    })
}

fn piece_count(tokenizer: &Tokenizer, sets: &mut [Set], piece: &[u8]) -> usize {
    if piece.len() > SHORT {
        return tokenizer.bpe.count(piece);
    }
    let key = key_of(piece);
    let Set(slots) = &mut sets[set_of(&key)];
    for slot in slots.iter() {
        if holds(slot, &key) {
            return (slot[3] >> 56) as usize;
        }
    }
    // A miss: encode, keep it in the first way, the first way's piece moves to the second.
    let count = tokenizer.bpe.count(piece);
    slots[1] = slots[0];
    // A piece of at most SHORT bytes has at most SHORT tokens: it fits the count byte.
    slots[0] = [key[0], key[1], key[2], key[3] | ((count as u64) << 56)];
    count
}

/// The same count without the table.
pub fn uncached(tokenizer: &Tokenizer, text: &str) -> usize {
    tokenizer
        .split(text)
        .map(|piece| tokenizer.bpe.count(piece.as_bytes()))
        .sum()
}
