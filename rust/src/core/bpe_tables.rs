//! The tables behind exact counting, shipped compressed and built at first use.
//!
//! Counting is `bpe-openai`'s (its `Tokenizer`: a pre-tokenizing regex, then byte-pair encoding
//! each piece by backtracking). Its prebuilt tables for both encodings are 47 MB; linked into the
//! extension they made a 26.5 MB wheel. Counting reads only part of them: the tokens' bytes, the
//! split table (which pair of tokens each token merges), the longest-prefix links and the
//! leftmost-longest automaton. The two overlapping-match automata (for other encoders) and the
//! bytes-to-token hash are left out, the rest is compressed with zstd: 8.6 MB for both encodings.
//! At first use of an encoding its table is decompressed and deserialized into `bpe`'s own
//! `BytePairEncoding` (once per process, behind a `LazyLock`); counting then runs the same code
//! on the same data as before. Rebuilding the tables from the ranks instead (`from_dictionary`)
//! takes seconds. The figures are in `docs/tokens.md`.
//!
//! The shipped files (`rust/data/*.bpe.zst`) are generated from `bpe-openai`'s own tables by the
//! test `shipped_tables_are_the_crates_tables` (`MEMCI_WRITE_TOKEN_TABLES=1` rewrites them), which
//! also checks them: the versions of `bpe` and `bpe-openai` are pinned in `Cargo.toml` because the
//! files are in `bpe`'s serialized layout.
//!
//! The `BytePairEncoding` built here must only be used to count, encode by backtracking and read
//! tokens' bytes: its other encoders need the parts left out. It never leaves `core::tokens`.

use std::sync::LazyLock;

use bpe_openai::Tokenizer;
use bpe_openai::byte_pair_encoding::BytePairEncoding;

const O200K_TABLES: &[u8] = include_bytes!("../../data/o200k_base.bpe.zst");
const CL100K_TABLES: &[u8] = include_bytes!("../../data/cl100k_base.bpe.zst");

/// tiktoken's `cl100k_base` pre-tokenizing pattern, without its last two alternatives: those
/// (`\s+(?!\S)|\s+`) are the whitespace patterns below.
const CL100K_PATTERN: &str = concat!(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)",
    r"|[^\r\n\p{L}\p{N}]?\p{L}+",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s*[\r\n]+",
    r"|\s+$",
);

/// tiktoken's `o200k_base` pre-tokenizing pattern, the same way.
const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+$",
);

/// Whitespace not followed by a non-space (tiktoken's `\s+(?!\S)`): the regex engine has no
/// look-ahead, so the pattern matches one more whitespace character, which the tokenizer drops
/// from the piece (the `true` of `Tokenizer::new_lookahead`). The end-of-text case is the `\s+$`
/// above.
const WHITESPACE_BEFORE_SPACE: &str = r"\s+\s";
/// Any other run of whitespace.
const WHITESPACE: &str = r"\s+";

static O200K: LazyLock<Tokenizer> = LazyLock::new(|| build(O200K_TABLES, O200K_PATTERN));
static CL100K: LazyLock<Tokenizer> = LazyLock::new(|| build(CL100K_TABLES, CL100K_PATTERN));

/// The `o200k_base` tokenizer, built at its first use (tens of milliseconds).
pub fn o200k_base() -> &'static Tokenizer {
    &O200K
}

/// The `cl100k_base` tokenizer, built at its first use.
pub fn cl100k_base() -> &'static Tokenizer {
    &CL100K
}

/// The encoding in a shipped table. The tables are compiled in and checked by the tests below, so
/// a failure here is a broken build, not bad input.
fn decode(tables: &[u8]) -> BytePairEncoding {
    // One call into a buffer of the recorded size: faster than streaming (70 ms against 100 ms for
    // `o200k_base`'s 14.6 MB, measured on a loaded machine).
    let size = zstd::zstd_safe::get_frame_content_size(tables)
        .ok()
        .flatten()
        .expect("the shipped token tables record their size");
    let bytes = zstd::bulk::decompress(tables, size as usize).expect("the shipped token tables decompress");
    rmp_serde::from_slice(&bytes).expect("the shipped token tables are in bpe's layout")
}

/// The pre-tokenizing patterns of an encoding, each with whether its match ends with one character
/// of look-ahead that is not part of the piece.
fn patterns(pattern: &'static str) -> [(&'static str, bool); 3] {
    [(pattern, false), (WHITESPACE_BEFORE_SPACE, true), (WHITESPACE, false)]
}

fn build(tables: &[u8], pattern: &'static str) -> Tokenizer {
    Tokenizer::new_lookahead(decode(tables), &patterns(pattern), false).expect("the pre-tokenizing patterns compile")
}

/// An encoding's pre-tokenizer: the same patterns as its [`Tokenizer`]'s, compiled once more so
/// that each thread searches them with its own cache (`bpe-openai`'s shares one behind a pool,
/// which costs every thread but the first a lock per piece).
pub struct Splitter {
    regex: regex_automata::meta::Regex,
    lookahead: [bool; 3],
    words: Words,
}

/// How an encoding's pattern reads a plain ASCII word (with or without its leading space), the
/// commonest piece, which the splitter recognises without the regex. Anything else, and any word
/// that a non-ASCII character (a letter or a mark may continue it) or, for `o200k_base`, an
/// apostrophe (a contraction may follow) ends, goes to the regex.
#[derive(Clone, Copy)]
enum Words {
    /// `o200k_base`: `[A-Z]*[a-z]+`: a word ends where its lower-case run does, so `HelloWorld`
    /// is two pieces and `HELLO` is left to the regex.
    CaseRuns,
    /// `cl100k_base`: `[A-Za-z]+`.
    Letters,
}

impl Words {
    /// The length of the ASCII word `rest` starts with, when the pattern's answer is sure.
    fn at_start(self, rest: &[u8]) -> Option<usize> {
        let run = |from: usize, member: fn(&u8) -> bool| from + rest[from..].iter().take_while(|b| member(b)).count();
        let start = usize::from(rest.first() == Some(&b' '));
        let end = match self {
            Words::CaseRuns => {
                let lower = run(start, u8::is_ascii_uppercase);
                let end = run(lower, u8::is_ascii_lowercase);
                (end > lower).then_some(end)?
            }
            Words::Letters => {
                let end = run(start, u8::is_ascii_alphabetic);
                (end > start).then_some(end)?
            }
        };
        match rest.get(end) {
            Some(&b) if b >= 0x80 => None,
            Some(b'\'') if matches!(self, Words::CaseRuns) => None,
            _ => Some(end),
        }
    }
}

static O200K_SPLITTER: LazyLock<Splitter> = LazyLock::new(|| Splitter::new(O200K_PATTERN, Words::CaseRuns));
static CL100K_SPLITTER: LazyLock<Splitter> = LazyLock::new(|| Splitter::new(CL100K_PATTERN, Words::Letters));

/// The `o200k_base` pre-tokenizer.
pub fn o200k_splitter() -> &'static Splitter {
    &O200K_SPLITTER
}

/// The `cl100k_base` pre-tokenizer.
pub fn cl100k_splitter() -> &'static Splitter {
    &CL100K_SPLITTER
}

impl Splitter {
    fn new(pattern: &'static str, words: Words) -> Self {
        let patterns = patterns(pattern);
        let regex = regex_automata::meta::Regex::new_many(&patterns.map(|(p, _)| p))
            .expect("the pre-tokenizing patterns compile");
        Self {
            regex,
            lookahead: patterns.map(|(_, lookahead)| lookahead),
            words,
        }
    }

    /// A search cache for one thread.
    pub fn cache(&self) -> regex_automata::meta::Cache {
        self.regex.create_cache()
    }

    /// Call `piece` with each piece of `text`, in order: the longest match of the patterns
    /// anchored where the last piece ended, less its look-ahead character for the look-ahead
    /// pattern; a plain ASCII word is read without the regex ([`Words`]). The pieces are the
    /// [`Tokenizer`]'s (`tokens::tests` checks it, on random text over the characters where the
    /// rules differ).
    pub fn each_piece<'t>(
        &self,
        cache: &mut regex_automata::meta::Cache,
        text: &'t str,
        mut piece: impl FnMut(&'t str),
    ) {
        use regex_automata::{Anchored, Input};
        let mut at = 0;
        while at < text.len() {
            let rest = &text[at..];
            if let Some(end) = self.words.at_start(rest.as_bytes()) {
                piece(&rest[..end]);
                at += end;
                continue;
            }
            let Some(found) = self
                .regex
                .search_half_with(cache, &Input::new(rest).anchored(Anchored::Yes))
            else {
                return;
            };
            let mut end = found.offset();
            if self.lookahead[found.pattern().as_usize()] {
                end -= rest[..end].chars().next_back().map_or(0, char::len_utf8);
            }
            if end == 0 {
                return; // no pattern matches the empty string; never loop if one did
            }
            piece(&rest[..end]);
            at += end;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The shipped tables against `bpe-openai`'s prebuilt ones (linked into the test binary only).

    use std::collections::{BTreeMap, HashMap};
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::*;

    /// `bpe`'s serialized `BytePairEncoding`, field by field in its order; the maps sorted so that
    /// a written table is the same bytes every time.
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Layout {
        all_tokens: Vec<u8>,
        token_starts: Vec<u32>,
        bytes_hash_to_token: BTreeMap<u32, u32>,
        split_table: Vec<(u32, u32)>,
        pair_lookup: BTreeMap<(u32, u32), u32>,
        longest_searcher: Automaton,
        overlapping_searcher: Automaton,
        overlapping_searcher_rev: Automaton,
        next_prefix_match: Vec<u32>,
        hash_factor: u64,
    }

    /// A serialized automaton: bytes.
    #[derive(PartialEq, Debug)]
    struct Automaton(Vec<u8>);

    impl Serialize for Automaton {
        fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }

    impl<'de> Deserialize<'de> for Automaton {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            struct Bytes;
            impl serde::de::Visitor<'_> for Bytes {
                type Value = Automaton;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a serialized automaton")
                }
                fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> std::result::Result<Automaton, E> {
                    Ok(Automaton(v.to_vec()))
                }
            }
            d.deserialize_bytes(Bytes)
        }
    }

    /// What memci ships of a full table: all that counting reads, and an automaton of one
    /// one-byte pattern in place of each overlapping-match automaton.
    fn counting_part(full: &BytePairEncoding) -> Layout {
        let bytes = rmp_serde::to_vec(full).unwrap();
        let mut layout: Layout = rmp_serde::from_slice(&bytes).unwrap();
        let stub = daachorse::DoubleArrayAhoCorasick::<u32>::new([[0u8]])
            .unwrap()
            .serialize();
        layout.overlapping_searcher = Automaton(stub.clone());
        layout.overlapping_searcher_rev = Automaton(stub);
        layout.bytes_hash_to_token.clear();
        layout
    }

    fn shipped(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("rust/data/{name}.bpe.zst"))
    }

    fn cases() -> [(&'static str, &'static Tokenizer, &'static Tokenizer); 2] {
        [
            ("o200k_base", bpe_openai::o200k_base(), o200k_base()),
            ("cl100k_base", bpe_openai::cl100k_base(), cl100k_base()),
        ]
    }

    #[test]
    fn shipped_tables_are_the_crates_tables() {
        let crates = [
            ("o200k_base", bpe_openai::o200k_base()),
            ("cl100k_base", bpe_openai::cl100k_base()),
        ];
        for (name, full) in crates {
            let expected = counting_part(&full.bpe);
            if std::env::var_os("MEMCI_WRITE_TOKEN_TABLES").is_some() {
                let bytes = rmp_serde::to_vec(&expected).unwrap();
                std::fs::write(shipped(name), zstd::bulk::compress(&bytes, 19).unwrap()).unwrap();
            }
            let compressed = std::fs::read(shipped(name)).unwrap();
            let bytes = zstd::stream::decode_all(&compressed[..]).unwrap();
            let layout: Layout = rmp_serde::from_slice(&bytes).unwrap();
            assert!(layout == expected, "{name}: rust/data differs from bpe-openai's tables");
        }
        assert_eq!(std::fs::read(shipped("o200k_base")).unwrap(), O200K_TABLES);
        assert_eq!(std::fs::read(shipped("cl100k_base")).unwrap(), CL100K_TABLES);
    }

    #[test]
    fn every_token_is_itself_and_counts_as_one() {
        for (name, full, built) in cases() {
            assert_eq!(built.bpe.num_tokens(), full.bpe.num_tokens(), "{name}");
            for rank in 0..built.bpe.num_tokens() as u32 {
                let bytes = built.bpe.token_bytes(rank);
                assert_eq!(bytes, full.bpe.token_bytes(rank), "{name} token {rank}");
                assert_eq!(built.bpe.count(bytes), 1, "{name} token {rank}");
            }
        }
    }

    #[test]
    fn texts_count_as_with_the_crates_tokenizers() {
        let mut texts: HashMap<&str, String> = HashMap::new();
        texts.insert("source", include_str!("tokens.rs").to_owned());
        texts.insert(
            "mixed",
            "Hello, 世界! It's   a test.\n\n\tcafé 123456 <|endoftext|>  \r\n ".repeat(50),
        );
        texts.insert("spaces", " a  b   c    \n     \n".repeat(20));
        texts.insert("empty", String::new());
        for (name, full, built) in cases() {
            for (what, text) in &texts {
                assert_eq!(
                    built.count(text.as_str()),
                    full.count(text.as_str()),
                    "{name} on {what}"
                );
                assert_eq!(
                    built.encode(text.as_str()),
                    full.encode(text.as_str()),
                    "{name} on {what}"
                );
            }
        }
    }
}
