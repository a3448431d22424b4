//! The search tokenizer (not the model's BPE tokens: those are `tokens.rs`): lowercase word tokens
//! for alphabetic scripts, character unigrams and bigrams for CJK (which is written without spaces
//! between words).
//!
//! Rules, in one pass over the characters:
//! - a CJK character (Han, Hiragana, Katakana, Hangul) is a token by itself, and with the CJK
//!   character right before it (no other character between) it also forms a bigram token;
//! - a run of other alphanumeric characters (`char::is_alphanumeric`: letters and digits of any
//!   script) is a word token, lowercased (`str::to_lowercase`, so a final sigma is handled);
//! - everything else (spaces, punctuation, `_`, symbols, emoji) separates tokens.
//!
//! `"数据库 index_v2"` gives `数 据 数据 库 据库 index v2`. Each token comes with its byte span in
//! the text, so snippets can be cut around matches.

use std::borrow::Cow;

use crate::core::stem::stem;

/// Whether `c` is written without spaces between words: Han ideographs (with the extensions and
/// the compatibility blocks), Hiragana, Katakana (with the half-width forms) and Hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0x3400..=0x4DBF    // Han extension A
        | 0x4E00..=0x9FFF    // Han
        | 0xF900..=0xFAFF    // Han compatibility
        | 0xFF66..=0xFF9F    // half-width Katakana
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0x20000..=0x3134F  // Han extensions B to G, compatibility supplement
    )
}

/// Call `emit(token, start, end)` for every token of `text`, in order of their end (a bigram comes
/// right after the unigram of its second character). `start..end` is the token's byte span.
pub fn tokenize<'t>(text: &'t str, mut emit: impl FnMut(Cow<'t, str>, usize, usize)) {
    let mut word: Option<usize> = None;
    let mut previous_cjk: Option<usize> = None;
    let flush = |start: Option<usize>, end: usize, emit: &mut dyn FnMut(Cow<'t, str>, usize, usize)| {
        if let Some(s) = start {
            emit(lowercase(&text[s..end]), s, end);
        }
    };
    for (i, c) in text.char_indices() {
        if is_cjk(c) {
            flush(word.take(), i, &mut emit);
            let end = i + c.len_utf8();
            emit(Cow::Borrowed(&text[i..end]), i, end);
            if let Some(p) = previous_cjk {
                emit(Cow::Borrowed(&text[p..end]), p, end);
            }
            previous_cjk = Some(i);
        } else if c.is_alphanumeric() {
            previous_cjk = None;
            word.get_or_insert(i);
        } else {
            previous_cjk = None;
            flush(word.take(), i, &mut emit);
        }
    }
    flush(word, text.len(), &mut emit);
}

/// `word` lowercased, borrowed when it already is (the common case: no allocation).
fn lowercase(word: &str) -> Cow<'_, str> {
    let unchanged = if word.is_ascii() {
        !word.bytes().any(|b| b.is_ascii_uppercase())
    } else {
        word.chars().all(|c| c.to_lowercase().eq(std::iter::once(c)))
    };
    if unchanged {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(word.to_lowercase())
    }
}

/// English words a query is searched without (when it holds any other word): they are in most
/// pages, and their idf, however small, let pages full of them outrank the page a question is
/// about. Measured on `LoCoMo` (docs/storage.md, "Search"): R@5 0.678 with, 0.728 without. Sorted.
const STOP_WORDS: [&str; 74] = [
    "a", "about", "am", "an", "and", "are", "as", "at", "be", "been", "being", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "me", "my", "no", "not", "of", "on", "or", "our", "she", "should", "so", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "to", "too", "very", "was", "we", "were", "what", "when",
    "where", "which", "who", "whom", "why", "will", "with", "would", "yes", "you", "your",
];

/// Whether `word` (a lowercase token) is one of the [`STOP_WORDS`].
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// A term as the index holds it: a word stemmed ([`crate::core::stem`]), any other token as it is.
pub fn stemmed(term: Cow<'_, str>) -> Cow<'_, str> {
    match stem(&term) {
        Some(s) => Cow::Owned(s),
        None => term,
    }
}

/// The tokens of `text` as owned strings, in order (for tests and queries).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    tokenize(text, |t, _, _| out.push(t.into_owned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercased_and_split_on_anything_not_alphanumeric() {
        assert_eq!(
            tokens("Read_File(path='A.rs') -> OK!"),
            ["read", "file", "path", "a", "rs", "ok"]
        );
        assert_eq!(tokens("Ünïcode ΣΊΣΥΦΟΣ v2.0"), ["ünïcode", "σίσυφος", "v2", "0"]);
        assert!(tokens("  ... 🙂 --- ").is_empty());
    }

    #[test]
    fn cjk_gives_unigrams_and_bigrams_within_a_run() {
        assert_eq!(tokens("数据库"), ["数", "据", "数据", "库", "据库"]);
        assert_eq!(tokens("東京。大阪"), ["東", "京", "東京", "大", "阪", "大阪"]);
        assert_eq!(tokens("Rust和Python"), ["rust", "和", "python"]);
        assert_eq!(
            tokens("カタカナ ひら"),
            ["カ", "タ", "カタ", "カ", "タカ", "ナ", "カナ", "ひ", "ら", "ひら"]
        );
        assert_eq!(tokens("한국어"), ["한", "국", "한국", "어", "국어"]);
    }

    #[test]
    fn stop_words_are_sorted_and_found() {
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "binary search needs them sorted"
        );
        assert!(is_stop_word("the") && is_stop_word("what") && is_stop_word("your"));
        assert!(!is_stop_word("bake") && !is_stop_word("The") && !is_stop_word("数据"));
        assert_eq!(stemmed(Cow::Borrowed("baking")), "bake");
        assert_eq!(stemmed(Cow::Borrowed("数据")), "数据");
    }

    #[test]
    fn spans_are_byte_ranges_of_the_text() {
        let text = "Go 东京x";
        let mut spans = Vec::new();
        tokenize(text, |t, s, e| spans.push((t.into_owned(), &text[s..e])));
        assert_eq!(
            spans,
            [
                ("go".into(), "Go"),
                ("东".into(), "东"),
                ("京".into(), "京"),
                ("东京".into(), "东京"),
                ("x".into(), "x")
            ]
        );
    }
}
