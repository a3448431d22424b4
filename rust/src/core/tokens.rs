//! Token counting: OpenAI's `o200k_base` and `cl100k_base` encodings (exact, offline: their
//! tables are compiled into the binary compressed, and built at first use, see
//! [`crate::core::bpe_tables`]), LangChain's character approximation, and the chat format's
//! per-message rules (see `docs/tokens.md`).
//!
//! `bpe-openai` was chosen over `tiktoken-rs` by measurement on the same 26k generated agent
//! texts (10 MB, 13% CJK), one core: `o200k_base` 150 ms against 205 ms, `cl100k_base` 198 ms
//! against 291 ms, identical token ids on every text, and 40 ms against 97 ms to load.

use std::fmt::Write as _;

use base64::Engine as _;
use bpe_openai::Tokenizer;
use rayon::prelude::*;

use crate::core::bpe_tables;
use crate::core::error::{Error, Result, quoted};
use crate::core::message::is_call_type;
use crate::core::model_names::model_encoding;
use crate::core::piece_counts;
use crate::core::turns::{Thinking, current_turn_start};
use crate::core::value::{Items, Value, ValueRef, write_value};

/// How text is turned into a token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-4.5, GPT-5, o1, o3, o4-mini.
    O200kBase,
    /// GPT-4, GPT-3.5-turbo, text-embedding-3-*, text-embedding-ada-002.
    Cl100kBase,
    /// LangChain's `count_tokens_approximately`: a character count divided by 4, rounded up per
    /// message. For models whose encoding is unknown.
    Approximate,
}

/// Tokens every message costs beyond its texts: the start and end markers and the separator after
/// the role (OpenAI cookbook, "How to count tokens with tiktoken").
pub const PER_MESSAGE: u64 = 3;
/// A `name` field costs its text and one more token.
pub const PER_NAME: u64 = 1;
/// Each tool call costs its name, its arguments and one more token (the rule tiktoken-rs uses).
pub const PER_TOOL_CALL: u64 = 1;
/// The reply priming (`<|start|>assistant<|message|>`) a list of messages costs once.
pub const REPLY_PRIMING: u64 = 3;
/// An image at `detail: "low"`: OpenAI's fixed cost.
pub const IMAGE_LOW: u64 = 85;
/// Any other image: a 1024x1024 image at high detail (85 + 4 tiles of 170); the size of an image
/// is not known without fetching it.
pub const IMAGE_HIGH: u64 = 765;
/// LangChain's approximation: characters per token.
const CHARS_PER_TOKEN: u64 = 4;

impl Encoding {
    pub const ALL: [Encoding; 3] = [Encoding::O200kBase, Encoding::Cl100kBase, Encoding::Approximate];

    /// An encoding by its name (`o200k_base`, `cl100k_base`, `approximate`) or by a model's name.
    pub fn parse(name: &str) -> Result<Encoding> {
        match name {
            "o200k_base" => return Ok(Encoding::O200kBase),
            "cl100k_base" => return Ok(Encoding::Cl100kBase),
            "approximate" => return Ok(Encoding::Approximate),
            _ => {}
        }
        let known = model_encoding(name);
        match known {
            Some("o200k_base") => Ok(Encoding::O200kBase),
            Some("cl100k_base") => Ok(Encoding::Cl100kBase),
            _ => {
                let shown = quoted(name);
                let uses = known.map_or(String::new(), |e| {
                    format!(" (the model uses {e}, which memci does not ship)")
                });
                Err(Error::InvalidOperation(format!(
                    "unknown encoding {shown}{uses}: expected o200k_base, cl100k_base, approximate or an OpenAI model name such as gpt-4o"
                )))
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::Approximate => "approximate",
        }
    }

    /// Position in [`Encoding::ALL`], for per-encoding tables.
    pub fn index(self) -> usize {
        self as usize
    }

    fn tokenizer(self) -> Option<&'static Tokenizer> {
        match self {
            Encoding::O200kBase => Some(bpe_tables::o200k_base()),
            Encoding::Cl100kBase => Some(bpe_tables::cl100k_base()),
            Encoding::Approximate => None,
        }
    }

    /// The exact count of `text`, with the thread's memory of recent pieces
    /// ([`crate::core::piece_counts`]); none for the approximation.
    fn exact_count(self, text: &str) -> Option<u64> {
        let (tokenizer, splitter) = match self {
            Encoding::O200kBase => (bpe_tables::o200k_base(), bpe_tables::o200k_splitter()),
            Encoding::Cl100kBase => (bpe_tables::cl100k_base(), bpe_tables::cl100k_splitter()),
            Encoding::Approximate => return None,
        };
        Some(piece_counts::count(tokenizer, splitter, self.index(), text) as u64)
    }

    /// The tokens of `text`. Text that looks like a special token (`<|endoftext|>`) is counted as
    /// the plain text it is, as tiktoken's `encode_ordinary` does. O(len).
    pub fn count(self, text: &str) -> u64 {
        self.exact_count(text)
            .unwrap_or_else(|| (text.chars().count() as u64).div_ceil(CHARS_PER_TOKEN))
    }

    /// The count of each text, spread over the cores.
    pub fn count_batch<S: AsRef<str> + Sync>(self, texts: &[S]) -> Vec<u64> {
        texts
            .par_iter()
            .with_min_len(8)
            .map(|t| self.count(t.as_ref()))
            .collect()
    }

    /// What a list of messages costs beyond its messages: the reply priming for an exact encoding
    /// (none for an empty list); LangChain's approximation adds nothing.
    pub fn priming(self) -> u64 {
        match self {
            Encoding::Approximate => 0,
            _ => REPLY_PRIMING,
        }
    }

    /// The tokens one message costs in a chat request (see `docs/tokens.md`).
    pub fn count_message(self, message: ValueRef<'_>) -> u64 {
        self.count_message_parts(message).0
    }

    /// The tokens `message` costs, and how many of them its thinking is: what it costs less when
    /// it belongs to an earlier turn ([`Thinking::DropEarlier`]). One pass over a message with no
    /// thinking, two over one with some.
    pub fn count_message_parts(self, message: ValueRef<'_>) -> (u64, u64) {
        let mut tally = Tally::new(self, false, false);
        tally.message(message);
        if tally.met == Met::Nothing {
            return (tally.finish(), 0);
        }
        let full = tally.finish();
        let mut earlier = Tally::new(self, false, true);
        earlier.message(message);
        let earlier = earlier.finish();
        (full, full.saturating_sub(earlier))
    }

    /// The tokens each of `messages` costs in one request, the thinking of earlier turns dropped
    /// or counted by `thinking` (no priming). O(total text).
    pub fn count_message_list(self, messages: &[ValueRef<'_>], thinking: Thinking) -> Vec<u64> {
        let turn = match thinking {
            Thinking::DropEarlier => current_turn_start(messages.iter().copied()),
            Thinking::Count => 0,
        };
        messages
            .par_iter()
            .with_min_len(16)
            .enumerate()
            .map(|(i, &m)| {
                let (full, dropped) = self.count_message_parts(m);
                if i < turn { full - dropped } else { full }
            })
            .collect()
    }

    /// A lower bound on [`Encoding::count_message`], read without tokenizing: each text counts
    /// its words as its tokens (`at_least`), every fixed cost is charged in full. Exact for the
    /// approximation. `earlier`: the message belongs to an earlier turn, its thinking left out (a
    /// bound on the count less the thinking, [`Encoding::count_message_parts`]). A trim uses it to
    /// see that a message cannot fit before counting it. O(len).
    pub fn count_message_at_least(self, message: ValueRef<'_>, earlier: bool) -> u64 {
        let mut tally = Tally::new(self, true, earlier);
        tally.message(message);
        tally.finish()
    }

    /// The tokens of a list of messages: each message, plus the priming once if there are any.
    pub fn count_messages<'a>(self, messages: impl IntoIterator<Item = ValueRef<'a>>) -> u64 {
        let mut any = false;
        let total: u64 = messages
            .into_iter()
            .map(|m| {
                any = true;
                self.count_message(m)
            })
            .sum();
        if any { total + self.priming() } else { 0 }
    }

    /// The ranks file tiktoken reads (`<base64 of the token's bytes> <rank>` per line), rebuilt
    /// from the shipped tables: byte for byte the file OpenAI publishes. `None` for
    /// `Approximate`.
    pub fn ranks_file(self) -> Option<String> {
        let bpe = &self.tokenizer()?.bpe;
        let engine = base64::engine::general_purpose::STANDARD;
        let mut out = String::with_capacity(bpe.num_tokens() * 16);
        for rank in 0..bpe.num_tokens() as u32 {
            engine.encode_string(bpe.token_bytes(rank), &mut out);
            let _ = writeln!(out, " {rank}");
        }
        Some(out)
    }
}

/// At most the tokens of `text` in either exact encoding, in one pass over its bytes: the number
/// of its words (a printable ASCII character at the start or after a space or tab), and at least
/// one for any text.
///
/// Why it is a bound: both encodings first split a text into pieces by their pattern and give
/// every piece at least one token, and no piece holds two such word starts. The only whitespace
/// inside a piece that is not all whitespace is one leading character before letters or
/// punctuation (`[^\r\n\p{L}\p{N}]?`, ` ?`), or the newlines a run of punctuation may end with
/// (a `/` after them follows a newline, not a space or tab). The tests check it against the exact
/// count over generated and hand-made texts.
fn at_least(text: &str) -> u64 {
    let b = text.as_bytes();
    let Some(&first) = b.first() else {
        return 0;
    };
    let word = |c: u8| u8::from(c.wrapping_sub(b'!') <= b'~' - b'!');
    let gap = |c: u8| u8::from(c == b' ') | u8::from(c == b'\t');
    // Blocks of 255 pairs, each tallied in a byte, so that the loop runs on vector registers.
    let mut starts = usize::from(word(first));
    for (before, at) in b.chunks(255).zip(b[1..].chunks(255)) {
        let block = before.iter().zip(at).fold(0u8, |n, (&p, &c)| n + (gap(p) & word(c)));
        starts += usize::from(block);
    }
    starts.max(1) as u64
}

/// Adds up one message: exact encodings count each text; the approximation counts characters
/// and divides once at the end, as LangChain does.
struct Tally {
    encoding: Encoding,
    /// Count each text's [`at_least`] instead of its exact tokens.
    at_least: bool,
    /// Leave out thinking blocks and reasoning items: the message belongs to an earlier turn.
    earlier: bool,
    /// What thinking was met (counted or not).
    met: Met,
    tokens: u64,
    chars: u64,
}

/// The thinking a [`Tally`] met in a message.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Met {
    Nothing,
    /// A thinking block or a reasoning item.
    Thinking,
    /// A reasoning item of an earlier turn: not sent, so it costs nothing, not even its overhead.
    EarlierItem,
}

impl Tally {
    fn new(encoding: Encoding, at_least: bool, earlier: bool) -> Self {
        Self {
            encoding,
            at_least,
            earlier,
            met: Met::Nothing,
            tokens: 0,
            chars: 0,
        }
    }

    fn exact(&self) -> bool {
        self.encoding != Encoding::Approximate
    }

    fn text(&mut self, text: &str) {
        if self.at_least && self.exact() {
            self.tokens += at_least(text);
            return;
        }
        match self.encoding.exact_count(text) {
            Some(tokens) => self.tokens += tokens,
            None => self.chars += text.chars().count() as u64,
        }
    }

    /// A fixed cost that only exact counting charges (LangChain's approximation has none).
    fn overhead(&mut self, tokens: u64) {
        if self.exact() {
            self.tokens += tokens;
        }
    }

    fn finish(&self) -> u64 {
        if self.met == Met::EarlierItem {
            return 0;
        }
        self.tokens + self.chars.div_ceil(CHARS_PER_TOKEN) + PER_MESSAGE
    }

    /// A thinking text met: counted unless the message is an earlier turn's.
    fn thinking(&mut self, text: &str) {
        self.met = Met::Thinking;
        if !self.earlier {
            self.text(text);
        }
    }

    /// The encrypted `data` of a redacted thinking block: its tokens cannot be known offline, so
    /// it is estimated as a quarter of its characters (the approximation's rule), unless the
    /// message is an earlier turn's.
    fn redacted_thinking(&mut self, data: &str) {
        self.met = Met::Thinking;
        if !self.earlier {
            let chars = data.chars().count() as u64;
            if self.exact() {
                self.tokens += chars.div_ceil(CHARS_PER_TOKEN);
            } else {
                self.chars += chars;
            }
        }
    }

    fn message(&mut self, message: ValueRef<'_>) {
        let Some(fields) = message.as_dict() else {
            return;
        };
        if let Some(item_type) = fields.field("type").and_then(ValueRef::as_str)
            && item_type != "message"
        {
            return self.item(fields, item_type);
        }
        let role = fields.field("role").and_then(ValueRef::as_str);
        for (key, value) in fields.entries() {
            match (key, value.get()) {
                ("role" | "refusal", Value::Str(s)) => self.text(s),
                ("content", _) => self.content(value),
                ("name", Value::Str(s)) => {
                    self.text(s);
                    self.overhead(PER_NAME);
                }
                ("tool_calls", Value::List(calls)) => {
                    for call in calls.values() {
                        if let Some(function) = call.field("function").or_else(|| call.field("custom")) {
                            self.call(function);
                        }
                    }
                }
                ("function_call", Value::Dict(_)) => self.call(value),
                // LangChain's approximation counts a tool result's call id; exact counting does
                // not (the id is API plumbing, not text the model reads).
                ("tool_call_id", Value::Str(s)) if !self.exact() && role == Some("tool") => self.text(s),
                _ => {}
            }
        }
    }

    /// A Responses API item other than a message: the text the model reads in it (its `role`,
    /// `name`, `arguments`, string `input`, `output`, and the text of its `summary` and `content`
    /// parts) plus 1 for a tool call, like a chat tool call; ids, statuses and encrypted reasoning
    /// are not counted.
    fn item(&mut self, fields: Items<'_>, item_type: &str) {
        if item_type == "reasoning" {
            if self.earlier {
                self.met = Met::EarlierItem;
                return;
            }
            self.met = Met::Thinking;
        }
        for (key, value) in fields.entries() {
            match (key, value.get()) {
                ("role" | "name" | "arguments" | "input", Value::Str(s)) => self.text(s),
                ("output" | "summary" | "content", _) => self.content(value),
                _ => {}
            }
        }
        if is_call_type(item_type) {
            self.overhead(PER_TOOL_CALL);
        }
    }

    /// The `function` of a chat tool call (its name and its arguments, a JSON string), or the
    /// `custom` of a custom tool call (its name and its input).
    fn call(&mut self, function: ValueRef<'_>) {
        for key in ["name", "arguments", "input"] {
            if let Some(s) = function.field(key).and_then(ValueRef::as_str) {
                self.text(s);
            }
        }
        self.overhead(PER_TOOL_CALL);
    }

    fn content(&mut self, content: ValueRef<'_>) {
        match content.get() {
            Value::Str(s) => self.text(s),
            Value::List(blocks) => {
                for block in blocks.values() {
                    self.block(block);
                }
            }
            _ => {}
        }
    }

    fn block(&mut self, block: ValueRef<'_>) {
        let fields = match block.get() {
            Value::Str(s) => return self.text(s),
            Value::Dict(fields) => fields,
            _ => return,
        };
        let text = |key: &str| fields.field(key).and_then(ValueRef::as_str);
        match text("type") {
            Some("image_url" | "image" | "input_image") => {
                self.tokens += if self.exact() && image_detail(fields) != Some("low") {
                    IMAGE_HIGH
                } else {
                    IMAGE_LOW
                };
            }
            Some("tool_use") => {
                if let Some(name) = text("name") {
                    self.text(name);
                }
                if let Some(input) = fields.field("input") {
                    let mut json = String::new();
                    write_value(&mut json, input);
                    self.text(&json);
                }
                self.overhead(PER_TOOL_CALL);
            }
            Some("tool_result") => {
                if let Some(inner) = fields.field("content") {
                    self.content(inner);
                }
            }
            Some("thinking") => {
                if let Some(s) = text("thinking") {
                    self.thinking(s);
                }
            }
            Some("redacted_thinking") => {
                if let Some(s) = text("data") {
                    self.redacted_thinking(s);
                }
            }
            Some("refusal") => {
                if let Some(s) = text("refusal") {
                    self.text(s);
                }
            }
            _ => {
                if let Some(s) = text("text") {
                    self.text(s);
                }
            }
        }
    }
}

/// `detail` of an image block: OpenAI's `{"image_url": {"url", "detail"}}` or a flat `detail`.
fn image_detail(fields: Items<'_>) -> Option<&str> {
    fields
        .field("image_url")
        .and_then(|u| u.field("detail"))
        .or_else(|| fields.field("detail"))
        .and_then(ValueRef::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_random::Lcg;
    use crate::core::value::Encoder;

    fn message(role: &str, content: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let d = e.open_dict(2 + extra.len());
        e.key("role");
        e.str(role);
        e.key("content");
        e.str(content);
        for (k, v) in extra {
            e.key(k);
            e.str(v);
        }
        e.close(d);
        buf
    }

    #[test]
    fn the_splitter_and_the_memory_of_pieces_change_no_count() {
        // Many distinct short pieces (far more than a table's slots, so slots are replaced and
        // collide), repeated, mixed with long pieces, digits, CJK and whitespace runs.
        let mut text = String::new();
        let mut random = Lcg::new(7);
        for i in 0..40_000u32 {
            let seed = random.state();
            let word = match seed >> 61 {
                0 => format!(" w{}", seed % 20_000),
                1 => " the".to_owned(),
                2 => format!("{}", seed % 100_000),
                3 => "  \n\n".to_owned(),
                4 => "你好世界".repeat(1 + (seed % 3) as usize),
                5 => format!(" {}", "abcdefghij".repeat(1 + (seed % 5) as usize)),
                6 => format!("{i}-{}", (seed >> 20) % 997),
                _ => "'s!?".to_owned(),
            };
            text.push_str(&word);
        }
        let splitters = [bpe_tables::o200k_splitter(), bpe_tables::cl100k_splitter()];
        for (encoding, splitter) in [Encoding::O200kBase, Encoding::Cl100kBase].into_iter().zip(splitters) {
            let tokenizer = encoding.tokenizer().unwrap();
            let mut pieces = Vec::new();
            splitter.each_piece(&mut splitter.cache(), &text, |piece| pieces.push(piece));
            assert_eq!(
                pieces,
                tokenizer.split(&text).collect::<Vec<_>>(),
                "{} pieces",
                encoding.name()
            );
            let expected = tokenizer.count(text.as_str()) as u64;
            assert_eq!(piece_counts::uncached(tokenizer, &text) as u64, expected);
            assert_eq!(encoding.count(&text), expected, "{} cold", encoding.name());
            assert_eq!(encoding.count(&text), expected, "{} warm", encoding.name());
            let edges = [
                "",
                " ",
                "  ",
                "a  ",
                "a  b",
                " \n\n  x",
                "x\r\n\r\n",
                "1234567",
                "I'VE it's",
                "é\u{301}a",
                "\t\t\n",
            ];
            for edge in edges {
                let mut pieces = Vec::new();
                splitter.each_piece(&mut splitter.cache(), edge, |piece| pieces.push(piece));
                assert_eq!(pieces, tokenizer.split(edge).collect::<Vec<_>>(), "{edge:?}");
                assert_eq!(encoding.count(edge), tokenizer.count(edge) as u64, "{edge:?}");
            }
            for line in text.split_inclusive('!').take(500) {
                assert_eq!(encoding.count(line), tokenizer.count(line) as u64, "{line:?}");
            }
        }
    }

    #[test]
    fn the_splitter_reads_words_as_the_pattern_does() {
        // Random short texts over the characters where a word's end is decided: both cases,
        // apostrophes and contractions, digits, spaces and newlines, punctuation, non-ASCII
        // letters of both cases, a combining mark, CJK, an emoji.
        const ALPHABET: [&str; 24] = [
            "a", "b", "Z", "Q", " ", " ", "'", "'s", "'LL", "1", "42", "\n", "\r\n", "\t", ".", "(", "/", "é", "É",
            "\u{301}", "漢", "😀", "ǅ", "ʰ",
        ];
        let splitters = [bpe_tables::o200k_splitter(), bpe_tables::cl100k_splitter()];
        let tokenizers = [
            Encoding::O200kBase.tokenizer().unwrap(),
            Encoding::Cl100kBase.tokenizer().unwrap(),
        ];
        let mut random = Lcg::new(11);
        let mut next = |n: u64| random.below(n);
        for _ in 0..20_000 {
            let len = next(16);
            let text: String = (0..len)
                .map(|_| ALPHABET[next(ALPHABET.len() as u64) as usize])
                .collect();
            for (splitter, tokenizer) in splitters.iter().zip(tokenizers) {
                let mut pieces = Vec::new();
                splitter.each_piece(&mut splitter.cache(), &text, |piece| pieces.push(piece));
                assert_eq!(pieces, tokenizer.split(&text).collect::<Vec<_>>(), "{text:?}");
            }
        }
    }

    #[test]
    fn at_least_never_passes_the_exact_count() {
        // Random texts over the characters where pieces begin and end: spaces and tabs before
        // words, punctuation and digits, newlines before a `/`, Unicode spaces, contractions,
        // letters of both cases, CJK, an emoji, a special-token lookalike.
        const ALPHABET: [&str; 26] = [
            "a",
            "Zq",
            " ",
            " ",
            "\t",
            "  ",
            "!",
            "?!",
            "/",
            "\n",
            "\r\n",
            "1",
            "2024",
            "'s",
            "'LL",
            "é",
            "\u{a0}",
            "\u{3000}",
            "漢字",
            "😀",
            "\u{301}",
            "<|endoftext|>",
            "(",
            "\"",
            "-",
            "_x",
        ];
        let mut random = Lcg::new(3);
        let mut next = |n: u64| random.below(n);
        let edges = [
            "",
            " ",
            "x",
            " x",
            "a!\n/b",
            "a\t b",
            "!!\n\n//x",
            "  \u{3000} x",
            "it's a test",
        ];
        let random = (0..30_000).map(|_| {
            let len = next(24);
            (0..len)
                .map(|_| ALPHABET[next(ALPHABET.len() as u64) as usize])
                .collect::<String>()
        });
        for text in edges.iter().map(|e| (*e).to_owned()).chain(random) {
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                assert!(
                    at_least(&text) <= encoding.count(&text),
                    "{text:?} in {}",
                    encoding.name()
                );
            }
        }
        // Close enough to settle a trim: most of the count of prose, none of an empty text.
        let prose = "The quick brown fox jumps over the lazy dog, then naps in the sun. ".repeat(20);
        assert!(at_least(&prose) * 10 >= Encoding::O200kBase.count(&prose) * 7);
        assert_eq!(at_least(""), 0);
        assert_eq!(at_least("\u{3000}"), 1);
    }

    #[test]
    fn a_message_costs_at_least_its_lower_bound() {
        let call = serde_json::json!({"id": "c1", "type": "function", "function": {"name": "get weather", "arguments": "{\"city\": \"Paris\"}"}});
        let messages = [
            message("user", "hello there, world!", &[("name", "bob")]),
            item(&serde_json::json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            item(&serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "what is in this image?"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                {"type": "tool_use", "id": "t1", "name": "look", "input": {"q": "a b c"}},
            ]})),
            item(&serde_json::json!({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"})),
        ];
        for m in &messages {
            for encoding in Encoding::ALL {
                let (bound, exact) = (
                    encoding.count_message_at_least(ValueRef::new(m), false),
                    encoding.count_message(ValueRef::new(m)),
                );
                assert!(bound <= exact, "{} {bound} > {exact}", encoding.name());
                assert!(bound > PER_MESSAGE, "every text counts");
                if encoding == Encoding::Approximate {
                    assert_eq!(bound, exact);
                }
            }
        }
        // In an earlier turn, the bound leaves the thinking out as the count does: a reasoning
        // item is not sent at all, a thinking block's words do not count.
        let thinking = [
            item(&serde_json::json!({"type": "reasoning", "id": "rs", "summary": []})),
            item(&serde_json::json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "a long chain of thought", "signature": "s"},
                {"type": "text", "text": "the answer"},
            ]})),
        ];
        for m in &thinking {
            for encoding in Encoding::ALL {
                let (full, dropped) = encoding.count_message_parts(ValueRef::new(m));
                let bound = encoding.count_message_at_least(ValueRef::new(m), true);
                assert!(dropped > 0, "{} has thinking", encoding.name());
                assert!(
                    bound <= full - dropped,
                    "{} {bound} > {}",
                    encoding.name(),
                    full - dropped
                );
            }
        }
    }

    #[test]
    fn counts_known_texts_exactly() {
        assert_eq!(Encoding::Cl100kBase.count("hello world"), 2);
        assert_eq!(Encoding::O200kBase.count("hello world"), 2);
        assert_eq!(Encoding::O200kBase.count(""), 0);
        // Special-token lookalikes are plain text: several tokens, never one.
        assert!(Encoding::O200kBase.count("<|endoftext|>") > 1);
        assert_eq!(Encoding::Approximate.count("abcde"), 2);
        assert_eq!(Encoding::Approximate.count("你好"), 1);
    }

    #[test]
    fn names_and_models_resolve_to_encodings() {
        assert_eq!(Encoding::parse("gpt-4o").unwrap(), Encoding::O200kBase);
        assert_eq!(Encoding::parse("gpt-4o-2024-08-06").unwrap(), Encoding::O200kBase);
        assert_eq!(Encoding::parse("gpt-4-0613").unwrap(), Encoding::Cl100kBase);
        assert_eq!(Encoding::parse("gpt-4.1-mini").unwrap(), Encoding::O200kBase);
        assert_eq!(Encoding::parse("cl100k_base").unwrap(), Encoding::Cl100kBase);
        let err = Encoding::parse("p50k_base").unwrap_err().to_string();
        assert!(err.contains("\"p50k_base\""), "{err}");
        assert!(Encoding::parse("gpt-4ox").is_err());
        // tiktoken's rules: `gpt-5` is a bare prefix; `gpt-4.5` alone is no name it knows.
        for name in [
            "gpt-5.1",
            "gpt-5.2-codex",
            "gpt-5.4-pro",
            "gpt-5.5",
            "o4-mini-deep-research",
        ] {
            assert_eq!(Encoding::parse(name).unwrap(), Encoding::O200kBase, "{name}");
        }
        assert!(Encoding::parse("gpt-4.5").is_err());
        // A fine-tuned model is its base model's.
        let tuned = Encoding::parse("ft:gpt-4.1-mini-2025-04-14:acme::x").unwrap();
        assert_eq!(tuned, Encoding::O200kBase);
        assert_eq!(
            Encoding::parse("ft:gpt-3.5-turbo-0125:acme::x").unwrap(),
            Encoding::Cl100kBase
        );
        let err = Encoding::parse("text-davinci-003").unwrap_err().to_string();
        assert!(
            err.contains("the model uses p50k_base, which memci does not ship"),
            "{err}"
        );
    }

    #[test]
    fn the_thinking_of_earlier_turns_is_dropped_or_counted() {
        let e = Encoding::O200kBase;
        let plan = "First I will look the city up, then check the forecast twice. ".repeat(5);
        let history: Vec<Vec<u8>> = [
            serde_json::json!({"role": "user", "content": "weather in Paris?"}),
            serde_json::json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": plan, "signature": "s"},
                {"type": "redacted_thinking", "data": "abcdefgh"},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}},
            ]}),
            serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}),
            serde_json::json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "done"}]}),
            serde_json::json!({"role": "user", "content": "and tomorrow?"}),
            serde_json::json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "look again"}]}),
        ]
        .iter()
        .map(item)
        .collect();
        let messages: Vec<ValueRef<'_>> = history.iter().map(|m| ValueRef::new(m)).collect();
        // The tool result continues the first turn; the last user message opens the second.
        assert_eq!(current_turn_start(messages.iter().copied()), 4);
        assert_eq!(current_turn_start(messages[..4].iter().copied()), 0);
        let counted = e.count_message_list(&messages, Thinking::Count);
        let dropped = e.count_message_list(&messages, Thinking::DropEarlier);
        assert_eq!(
            counted[1] - dropped[1],
            e.count(&plan) + 2,
            "the plan and 8 characters / 4"
        );
        assert_eq!(counted[3] - dropped[3], e.count("done"));
        assert_eq!(counted[4..], dropped[4..], "the current turn counts its thinking");
        assert_eq!(counted[0], dropped[0]);
        // Each message's parts: its count and what its thinking adds to it.
        let (full, thinking) = e.count_message_parts(messages[1]);
        assert_eq!((full, full - thinking), (counted[1], dropped[1]));
        assert_eq!(e.count_message_parts(messages[0]).1, 0);
        // An earlier reasoning item is not sent at all.
        let earlier = [messages[5], messages[4]];
        assert_eq!(e.count_message_list(&earlier, Thinking::DropEarlier)[0], 0);
    }

    #[test]
    fn a_message_costs_its_texts_and_the_chat_overhead() {
        let e = Encoding::Cl100kBase;
        let m = message("user", "hello world", &[("name", "bob")]);
        let expected = PER_MESSAGE + e.count("user") + e.count("hello world") + e.count("bob") + PER_NAME;
        assert_eq!(e.count_message(ValueRef::new(&m)), expected);
        let list = e.count_messages([ValueRef::new(&m), ValueRef::new(&m)]);
        assert_eq!(list, 2 * expected + REPLY_PRIMING);
        assert_eq!(e.count_messages(std::iter::empty()), 0);
    }

    #[test]
    fn the_approximation_divides_characters_once_per_message() {
        let m = message("tool", "abcdefgh", &[("tool_call_id", "call_1")]);
        // 4 (role) + 8 (content) + 6 (call id) characters: ceil(18 / 4) + 3.
        assert_eq!(Encoding::Approximate.count_message(ValueRef::new(&m)), 5 + 3);
        assert_eq!(Encoding::Approximate.priming(), 0);
    }

    fn item(json: &serde_json::Value) -> Vec<u8> {
        let mut buf = Vec::new();
        crate::core::value::encode_json(&mut Encoder::new(&mut buf), json);
        buf
    }

    #[test]
    fn items_cost_their_texts_and_the_message_overhead() {
        let e = Encoding::O200kBase;
        let output = "the weather in Paris is sunny and 21 degrees ".repeat(50);
        let m = item(&serde_json::json!({"type": "function_call_output", "call_id": "call_1", "output": output}));
        assert_eq!(e.count_message(ValueRef::new(&m)), e.count(&output) + PER_MESSAGE);
        let arguments = r#"{"city": "Paris"}"#;
        let m = item(&serde_json::json!({
            "type": "function_call", "call_id": "call_1", "name": "weather", "arguments": arguments, "status": "completed"
        }));
        let expected = e.count("weather") + e.count(arguments) + PER_TOOL_CALL + PER_MESSAGE;
        assert_eq!(e.count_message(ValueRef::new(&m)), expected);
        let m = item(&serde_json::json!({
            "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA",
            "summary": [{"type": "summary_text", "text": "Looked up the city."}]
        }));
        assert_eq!(
            e.count_message(ValueRef::new(&m)),
            e.count("Looked up the city.") + PER_MESSAGE
        );
    }

    #[test]
    fn ranks_files_start_with_the_single_bytes() {
        let file = Encoding::Cl100kBase.ranks_file().unwrap();
        assert!(file.starts_with("IQ== 0\nIg== 1\n"));
        assert_eq!(file.lines().count(), 100_256);
        assert!(Encoding::Approximate.ranks_file().is_none());
    }
}
