//! The single-pass reader of a record: one scan of the line's bytes finds the messages list,
//! each message's span, and encodes each message straight into the store's form (no value tree
//! in between), then checks it by the store's own rules ([`Incoming::finish`]).
//!
//! It is a fast path, not a second rule set: it accepts only what it is sure the reference path
//! (`serde_json`, the number rule `MessageArray.from_json` applies, [`Incoming::finish`]) accepts,
//! and encodes it to the same bytes. Anything else (a syntax error, a duplicate key, a number the
//! store refuses, nesting deeper than [`MAX_DEPTH`], a message the rules refuse) makes it give up,
//! and the record goes through the reference path, whose answer (and error wording and path) is
//! then the answer. So bad records cost two reads; good records one.

use std::collections::HashSet;
use std::ops::Range;

use crate::core::store::{Incoming, MAX_INT_DIGITS};
use crate::core::value::{Encoder, ValueRef, encode_number_text};

/// Deeper nesting than this (counted from the record itself) is left to the reference path,
/// whose parser has its own limit (`serde_json`'s 128).
pub const MAX_DEPTH: usize = 100;

/// The messages a record's tables have room for before they grow.
const MESSAGES_AHEAD: usize = 64;

/// The fast path gave up; the reference path decides.
#[derive(Debug)]
pub struct GiveUp;

type Read<T> = Result<T, GiveUp>;

/// What one scan found: the span of the messages list, the span of each message, where message
/// paths start (`messages` in an object, empty in a bare list), and the encoded, checked messages.
pub struct Scanned {
    pub list: Range<usize>,
    pub messages: Vec<Range<usize>>,
    pub prefix: &'static str,
    pub incoming: Incoming,
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// A string with escapes, decoded.
    scratch: String,
    /// The places in the encoding of the inline keys of the dicts being read ([`KeysSeen`]).
    inline_keys: Vec<Range<usize>>,
}

/// Read the record `text` (already trimmed of surrounding whitespace) in one pass.
pub fn scan(text: &str) -> Read<Scanned> {
    let mut r = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        scratch: String::new(),
        inline_keys: Vec::new(),
    };
    // Room for a typical conversation's messages: growing from one by doubling was a fifth of
    // a record's reallocations.
    let mut incoming = Incoming::with_capacity(MESSAGES_AHEAD);
    let (list, messages, prefix) = match r.bytes.first() {
        Some(b'[') => {
            let (list, messages) = r.messages(&mut incoming, "")?;
            (list, messages, "")
        }
        Some(b'{') => {
            r.pos += 1;
            let mut found = None;
            let mut scratch = Vec::new();
            r.ws();
            if r.peek()? == b'}' {
                r.pos += 1;
            } else {
                loop {
                    r.expect(b'"')?;
                    let is_messages = match r.string()? {
                        Some(span) => &r.bytes[span] == b"messages",
                        None => r.scratch == "messages",
                    };
                    r.ws();
                    r.expect(b':')?;
                    r.ws();
                    if is_messages {
                        if found.is_some() || r.peek()? != b'[' {
                            return Err(GiveUp);
                        }
                        found = Some(r.messages(&mut incoming, "messages")?);
                    } else {
                        scratch.clear();
                        r.value(&mut scratch, 1)?;
                    }
                    if r.item_ends(b'}')? {
                        break;
                    }
                }
            }
            let (list, messages) = found.ok_or(GiveUp)?;
            (list, messages, "messages")
        }
        _ => return Err(GiveUp),
    };
    if r.pos != r.bytes.len() {
        return Err(GiveUp);
    }
    Ok(Scanned {
        list,
        messages,
        prefix,
        incoming,
    })
}

impl Reader<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Read<u8> {
        self.bytes.get(self.pos).copied().ok_or(GiveUp)
    }

    fn next(&mut self) -> Read<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Ok(b)
    }

    fn expect(&mut self, b: u8) -> Read<()> {
        if self.next()? == b { Ok(()) } else { Err(GiveUp) }
    }

    /// After an item of a container: `true` at the container's `close`, `false` after a comma.
    fn item_ends(&mut self, close: u8) -> Read<bool> {
        self.ws();
        match self.next()? {
            b if b == close => Ok(true),
            b',' => {
                self.ws();
                Ok(false)
            }
            _ => Err(GiveUp),
        }
    }

    /// The messages list at `pos`: each message encoded into `incoming` and checked.
    fn messages(&mut self, incoming: &mut Incoming, prefix: &'static str) -> Read<(Range<usize>, Vec<Range<usize>>)> {
        let start = self.pos;
        self.expect(b'[')?;
        let mut spans = Vec::with_capacity(MESSAGES_AHEAD);
        self.ws();
        if self.peek()? == b']' {
            self.pos += 1;
        } else {
            loop {
                let from = self.pos;
                let (at, buf) = incoming.buffer();
                self.value(buf, 2)?;
                spans.push(from..self.pos);
                let i = spans.len() - 1;
                incoming.finish(at, || format!("{prefix}[{i}]")).map_err(|_| GiveUp)?;
                if self.item_ends(b']')? {
                    break;
                }
            }
        }
        Ok((start..self.pos, spans))
    }

    /// One JSON value at `pos`, encoded onto `buf`; `depth` counts the containers around it.
    fn value(&mut self, buf: &mut Vec<u8>, depth: usize) -> Read<()> {
        match self.peek()? {
            b'"' => {
                self.pos += 1;
                match self.string()? {
                    Some(span) => Encoder::new(buf).str(&self.text[span]),
                    None => Encoder::new(buf).str(&self.scratch),
                }
            }
            b'{' => self.container(buf, depth + 1, b'}')?,
            b'[' => self.container(buf, depth + 1, b']')?,
            b't' => {
                self.literal(b"true")?;
                Encoder::new(buf).bool(true);
            }
            b'f' => {
                self.literal(b"false")?;
                Encoder::new(buf).bool(false);
            }
            b'n' => {
                self.literal(b"null")?;
                Encoder::new(buf).null();
            }
            b'-' | b'0'..=b'9' => self.number(buf)?,
            _ => return Err(GiveUp),
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Read<()> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(GiveUp)
        }
    }

    /// A list (`close` is `]`) or a dict (`}`) at `pos`, encoded onto `buf`.
    fn container(&mut self, buf: &mut Vec<u8>, depth: usize, close: u8) -> Read<()> {
        if depth > MAX_DEPTH {
            return Err(GiveUp);
        }
        let is_dict = close == b'}';
        self.pos += 1;
        let start = buf.len();
        let open = if is_dict {
            Encoder::new(buf).open_dict_uncounted()
        } else {
            Encoder::new(buf).open_list_uncounted()
        };
        let mut count = 0;
        let mut keys = KeysSeen::starting(&self.inline_keys);
        self.ws();
        if self.peek()? == close {
            self.pos += 1;
        } else {
            loop {
                if is_dict {
                    self.expect(b'"')?;
                    let key = match self.string()? {
                        Some(span) => &self.text[span],
                        None => &self.scratch,
                    };
                    let len = key.len();
                    let code = Encoder::new(buf).key(key);
                    if keys.repeats(code, buf.len() - len..buf.len(), buf, &mut self.inline_keys) {
                        // The reference parser keeps the last value at the first key's place.
                        return Err(GiveUp);
                    }
                    self.ws();
                    self.expect(b':')?;
                    self.ws();
                }
                self.value(buf, depth)?;
                count += 1;
                if self.item_ends(close)? {
                    break;
                }
            }
        }
        self.inline_keys.truncate(keys.base);
        Encoder::new(buf).close_counted(open, count);
        if keys.wide && has_duplicate_keys(ValueRef::new(&buf[start..]), count) {
            return Err(GiveUp);
        }
        Ok(())
    }

    /// The string whose opening quote was just read: `Some(span)` of its text when it has no
    /// escapes, else `None` with the decoded string in `scratch`. `pos` ends after the quote.
    fn string(&mut self) -> Read<Option<Range<usize>>> {
        let start = self.pos;
        let rest = &self.bytes[start..];
        let end = string_end(rest)?;
        self.pos = start + end + 1;
        if rest[end] == b'"' {
            return Ok(Some(start..start + end));
        }
        self.scratch.clear();
        self.scratch.push_str(&self.text[start..start + end]);
        self.pos = start + end;
        loop {
            // At a backslash.
            self.pos += 1;
            let c = match self.next()? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return Err(GiveUp),
            };
            self.scratch.push(c);
            let from = self.pos;
            let rest = &self.bytes[from..];
            let end = string_end(rest)?;
            self.scratch.push_str(&self.text[from..from + end]);
            self.pos = from + end;
            if rest[end] == b'"' {
                self.pos += 1;
                return Ok(None);
            }
        }
    }

    /// The character of a `\u` escape (its `\u` read); a surrogate pair is two escapes. A lone
    /// surrogate gives up (the reference parser refuses it).
    fn unicode_escape(&mut self) -> Read<char> {
        let high = self.hex4()?;
        if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.pos..].starts_with(b"\\u") {
                return Err(GiveUp);
            }
            self.pos += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(GiveUp);
            }
            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).ok_or(GiveUp)
        } else {
            char::from_u32(high).ok_or(GiveUp)
        }
    }

    fn hex4(&mut self) -> Read<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or(GiveUp)?;
        let mut n = 0;
        for &d in digits {
            n = n * 16 + char::from(d).to_digit(16).ok_or(GiveUp)?;
        }
        self.pos += 4;
        Ok(n)
    }

    /// A number by JSON's grammar, encoded as the reference path encodes its text; a float that
    /// is not finite or an int of more digits than Python reads gives up (the store refuses them).
    fn number(&mut self, buf: &mut Vec<u8>) -> Read<()> {
        let start = self.pos;
        let b = self.bytes;
        let mut p = start;
        if b.get(p) == Some(&b'-') {
            p += 1;
        }
        let digits = |p: &mut usize| {
            let from = *p;
            while b.get(*p).is_some_and(u8::is_ascii_digit) {
                *p += 1;
            }
            *p - from
        };
        match b.get(p) {
            Some(b'0') => p += 1,
            Some(b'1'..=b'9') => {
                digits(&mut p);
            }
            _ => return Err(GiveUp),
        }
        let int_end = p;
        if b.get(p) == Some(&b'.') {
            p += 1;
            if digits(&mut p) == 0 {
                return Err(GiveUp);
            }
        }
        if matches!(b.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(b.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if digits(&mut p) == 0 {
                return Err(GiveUp);
            }
        }
        let text = &self.text[start..p];
        if p != int_end {
            if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                return Err(GiveUp);
            }
        } else if text.trim_start_matches('-').len() > MAX_INT_DIGITS {
            return Err(GiveUp);
        }
        self.pos = p;
        encode_number_text(&mut Encoder::new(buf), text);
        Ok(())
    }
}

/// Whether `b` ends a run of plain string bytes: a quote, a backslash, or a control character
/// (which a JSON string may not hold).
fn is_special(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Where the run of plain string bytes at the start of `bytes` ends: at a quote or a backslash;
/// a control character, or no end, gives up. Every byte of a message's text passes through here.
fn string_end(bytes: &[u8]) -> Read<usize> {
    let mut blocks = bytes.chunks_exact(16);
    let mut at = 0;
    for block in &mut blocks {
        let found = specials_16(block.try_into().unwrap_or(&[0; 16]));
        if found != 0 {
            return special_at(bytes, at + found.trailing_zeros() as usize);
        }
        at += 16;
    }
    let end = at + blocks.remainder().iter().position(|&b| is_special(b)).ok_or(GiveUp)?;
    special_at(bytes, end)
}

/// The end of a string's plain run at `at` (a quote or a backslash), or give up at a control
/// character.
fn special_at(bytes: &[u8], at: usize) -> Read<usize> {
    if bytes[at] < 0x20 { Err(GiveUp) } else { Ok(at) }
}

/// A bit for each byte of the 16 that is special ([`is_special`]), lowest bit first: three
/// compares and one mask with SSE2. Measured on the batch bench's 190 MB of records, one thread:
/// the single-pass read takes 68 ms this way, 80 ms with `u64` words (SWAR), 82 ms with
/// `memchr2` and a second pass for control characters, 152 ms with a per-byte loop (which the
/// compiler does not vectorize).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn specials_16(block: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is in every x86-64 CPU (the target's baseline features), so the instructions
    // exist; the load is unaligned and reads exactly the 16 bytes `block` borrows.
    unsafe {
        let x = _mm_loadu_si128(block.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
        // Unsigned x <= 0x1F: min(x, 0x1F) == x.
        let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1F)), x);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// A bit for each byte of the 16 that is special ([`is_special`]), lowest bit first.
#[cfg(not(target_arch = "x86_64"))]
fn specials_16(block: &[u8; 16]) -> u32 {
    let mut found = 0;
    for (i, &b) in block.iter().enumerate() {
        found |= u32::from(is_special(b)) << i;
    }
    found
}

/// The keys of the dict being read, checked for a repeat as each arrives: a well-known key (one
/// with a code, which an escaped spelling gets too, since codes are given to decoded keys) as a
/// bit of its code; another key as its place in the encoding, on the reader's stack of inline
/// keys (`Reader::inline_keys`, from `base`), compared with the dict's earlier ones. Past
/// [`PAIRWISE_KEYS`] inline keys the dict is `wide` and checked once it is closed, by a set.
struct KeysSeen {
    codes: u32,
    base: usize,
    wide: bool,
}

/// Inline keys of one dict compared pairwise as they come; more make the dict wide.
const PAIRWISE_KEYS: usize = 16;

impl KeysSeen {
    fn starting(stack: &[Range<usize>]) -> Self {
        Self {
            codes: 0,
            base: stack.len(),
            wide: false,
        }
    }

    /// Whether the key just encoded (its `code`, or its bytes at `place` in `buf`) repeats one
    /// of this dict's earlier keys (a wide dict answers at its close).
    fn repeats(&mut self, code: Option<u8>, place: Range<usize>, buf: &[u8], stack: &mut Vec<Range<usize>>) -> bool {
        if let Some(code) = code {
            let bit = 1 << code;
            let repeated = self.codes & bit != 0;
            self.codes |= bit;
            return repeated;
        }
        if self.wide {
            return false;
        }
        let earlier = &stack[self.base..];
        if earlier.len() == PAIRWISE_KEYS {
            self.wide = true;
            return false;
        }
        let key = &buf[place.clone()];
        if earlier.iter().any(|r| &buf[r.clone()] == key) {
            return true;
        }
        stack.push(place);
        false
    }
}

/// Whether the encoded dict `value` of `count` items repeats a key (a wide dict, at its close).
fn has_duplicate_keys(value: ValueRef<'_>, count: usize) -> bool {
    let Some(items) = value.as_dict() else {
        return false;
    };
    let mut seen = HashSet::with_capacity(count);
    items.entries().any(|(k, _)| !seen.insert(k))
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::core::batch::record::{Record, process};
    use crate::core::batch::{Format, Pipeline};

    fn pipeline() -> Pipeline {
        Pipeline::new(vec![], Format::Chat).unwrap()
    }

    /// Each message's encoding, and the record written back.
    type Reading = (Vec<Vec<u8>>, Vec<u8>);

    /// The reference reading of `text`: each message's encoding and the record written back
    /// with every message kept, or the error.
    fn reference(text: &str) -> Result<Reading, (String, String)> {
        let record = Record::parse(text).map_err(|b| (b.path, b.reason))?;
        let incoming = record.incoming(&pipeline()).map_err(|b| (b.path, b.reason))?;
        let encodings = incoming.messages().map(|(bytes, _)| bytes.to_vec()).collect();
        let mut out = Vec::new();
        record.write(&pipeline().apply(incoming), &mut out);
        Ok((encodings, out))
    }

    /// Check `text` both ways: when the single pass accepts it, the reference accepts it with the
    /// same encodings; the whole record path answers and writes as the reference does. Returns
    /// whether the single pass accepted it.
    fn cross_check(text: &str) -> bool {
        let expected = reference(text);
        let fast = scan(text.trim_matches(|c: char| c.is_ascii_whitespace()));
        let accepted = fast.is_ok();
        if let Ok(scanned) = fast {
            let got: Vec<Vec<u8>> = scanned.incoming.messages().map(|(b, _)| b.to_vec()).collect();
            assert_eq!(Some(&got), expected.as_ref().ok().map(|e| &e.0), "{text}");
        }
        let mut out = Vec::new();
        let answer = process(&pipeline(), text, &mut out)
            .map(|_| out)
            .map_err(|b| (b.path, b.reason));
        assert_eq!(answer, expected.map(|e| e.1), "{text}");
        accepted
    }

    #[test]
    fn accepts_and_encodes_what_the_reference_accepts() {
        for line in [
            "[]",
            r#"{"messages": []}"#,
            r#"[{"role":"user","content":"hi"}]"#,
            r#" { "id" : 7 , "messages" : [ { "role" : "user" , "content" : "h\u00e9\"\\\/\b\f\n\r\t\ud83d\ude00 x" } ] , "meta": {"a": [1, -0, 2.50, 1E5, -3e-2, 12345678901234567890123, true, false, null]} } "#,
            r#"[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}]"#,
            r#"[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]"#,
            r#"[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"u"}}]}]"#,
            r#"[{"role":"user","content":"x","x-custom":{"":[[],{}]}}]"#,
        ] {
            assert!(cross_check(line), "the single pass gave up on {line}");
        }
    }

    #[test]
    fn a_repeated_key_gives_way_to_the_reference_however_it_is_written() {
        let wide = |n: usize, last: &str| {
            let mut keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
            keys.push(format!("\"{last}\":0"));
            format!(r#"[{{"role":"user","content":"x","w":{{{}}}}}]"#, keys.join(","))
        };
        for (line, repeats) in [
            (r#"[{"role":"user","content":"x","role":"user"}]"#.to_owned(), true),
            (r#"[{"role":"user","content":"x","\u0072ole":"user"}]"#.to_owned(), true),
            (r#"[{"role":"user","content":"x","a\"b":1,"a\"b":2}]"#.to_owned(), true),
            (r#"[{"role":"user","content":"x","a\"b":1,"a\"c":2}]"#.to_owned(), false),
            (
                r#"[{"role":"user","content":"x","w":{"k0":1,"role":2,"k\u0030":3}}]"#.to_owned(),
                true,
            ),
            (
                r#"[{"role":"user","content":"x","w":{"k0":1,"name":2,"nam\u0065":3}}]"#.to_owned(),
                true,
            ),
            (
                r#"[{"role":"user","content":"x","w":{"a":{"b":1},"b":{"a":1,"b":2}}}]"#.to_owned(),
                false,
            ),
            (
                r#"[{"role":"user","content":"x","w":{"a":{"b":1,"b":1},"c":1}}]"#.to_owned(),
                true,
            ),
            (
                r#"[{"role":"user","content":"x","w":{"a":{"b":1},"c":1,"a":2}}]"#.to_owned(),
                true,
            ),
            // Around 16 inline keys, where the check goes from pairs of keys to a set.
            (wide(14, "k0"), true),
            (wide(15, "k0"), true),
            (wide(16, "k0"), true),
            (wide(16, "k15"), true),
            (wide(15, "new"), false),
            (wide(16, "new"), false),
            (wide(40, "k39"), true),
            (wide(40, "k3"), true),
            (wide(40, "role").replacen("\"k0\"", "\"role\"", 1), true),
            (wide(40, "new"), false),
        ] {
            assert_eq!(!cross_check(&line), repeats, "{line}");
        }
    }

    #[test]
    fn a_string_ends_where_a_byte_by_byte_reading_says() {
        let naive = |bytes: &[u8]| match bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20) {
            Some(i) if bytes[i] >= 0x20 => Some(i),
            _ => None,
        };
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Plain bytes (ASCII and high bytes) with a special byte at every place of the 16-byte
        // blocks and their tail, or none.
        for len in 0..80 {
            for special in [None, Some(b'"'), Some(b'\\'), Some(0x00), Some(0x1F), Some(b'\n')] {
                for round in 0..8 {
                    let mut bytes: Vec<u8> = (0..len)
                        .map(|_| match next() % 4 {
                            0 => 0x20,
                            1 => 0x7F,
                            2 => 0x80 | (next() % 0x80) as u8,
                            _ => b'a' + (next() % 26) as u8,
                        })
                        .collect();
                    if let (Some(b), true) = (special, len > 0) {
                        let at = (next() as usize + round) % len;
                        bytes[at] = b;
                    }
                    if round % 2 == 0 {
                        // A closing quote after the rest, as in a record.
                        bytes.push(b'"');
                    }
                    assert_eq!(string_end(&bytes).ok(), naive(&bytes), "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn a_long_container_encodes_as_the_reference_does() {
        for n in [127, 128, 300, 20_000] {
            let mut line = String::from(r#"[{"role":"user","content":"x","big":["#);
            for i in 0..n {
                let _ = write!(line, "{}{i}", if i > 0 { "," } else { "" });
            }
            line.push_str(r#"],"wide":{"#);
            for i in 0..n {
                let _ = write!(line, "{}\"k{i}\":{i}", if i > 0 { "," } else { "" });
            }
            line.push_str("}}]");
            assert!(cross_check(&line));
        }
    }

    #[test]
    fn hostile_lines_get_the_reference_answer() {
        let deep = |n: usize| {
            format!(
                r#"[{{"role":"user","content":"x","d":{}{}}}]"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        let mut hostile: Vec<String> = [
            "",
            "[",
            r#"[{"role":"user","content":"h\u00"#,
            r#"[{"role":"user","content":"héllo"#,
            r#"[{"role":"user","content":"\ud83d"}]"#,
            r#"[{"role":"user","content":"\ud83d\u0041"}]"#,
            r#"[{"role":"user","content":"\udc00"}]"#,
            r#"[{"role":"user","content":"\x"}]"#,
            "[{\"role\":\"user\",\"content\":\"tab\there\"}]",
            r#"[{"role":"user","content":"x"},]"#,
            r#"[{"role":"user","content":"x",}]"#,
            r#"[{"role":"user","content":"x"}] x"#,
            r#"[{"role":"user","content":"x","n":01}]"#,
            r#"[{"role":"user","content":"x","n":1.}]"#,
            r#"[{"role":"user","content":"x","n":-}]"#,
            r#"[{"role":"user","content":"x","n":.5}]"#,
            r#"[{"role":"user","content":"x","n":1e}]"#,
            r#"[{"role":"user","content":"x","n":+1}]"#,
            r#"[{"role":"user","content":"x","n":1e400}]"#,
            r#"[{"role":"user","content":"x","n":[-1e309]}]"#,
            r#"[{"role":"user","content":"x","n":NaN}]"#,
            r#"[{"role":"user","content":"x","n":tru}]"#,
            r#"[{"role":"user","content":"a","role":"assistant"}]"#,
            r#"[{"role":"user","content":"a","x":{"k":1,"k":2}}]"#,
            r#"[{"role":"user","content":"a","r\u006fle":"tool"}]"#,
            r#"{"messages":[],"messages":[]}"#,
            r#"{"messages":null}"#,
            r#"{"messages":{}}"#,
            r#"{"id":1}"#,
            r#"{"id":1e400,"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":"x"}],}"#,
            r#"{"mess\u0061ges":[{"role":"user","content":"x"}]}"#,
            r#"[{"role":"robot","content":"x"}]"#,
            r#"[{"role":"user","content":"x"}, {"role":"robot","content":"x"}, {]"#,
            r#"[{"role":"tool","content":"x"}]"#,
            "42",
            "\"text\"",
            "null",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        hostile.push(format!(r#"[{{"role":"user","content":"x","n":{}}}]"#, "9".repeat(4301)));
        hostile.push(format!(
            r#"[{{"role":"user","content":"x","n":-{}}}]"#,
            "9".repeat(4300)
        ));
        hostile.push(format!(
            r#"[{{"role":"user","content":"x","n":1{}.5}}]"#,
            "0".repeat(400)
        ));
        for n in [90, 98, 99, 120, 126, 127, 128, 200, 10_000] {
            hostile.push(deep(n));
        }
        for line in &hostile {
            cross_check(line);
        }
        // The guarded cases: the single pass gives way, and the reference refuses where it must.
        for line in [
            r#"[{"role":"user","content":"x","n":1e400}]"#,
            r#"[{"role":"user","content":"a","role":"assistant"}]"#,
            r#"[{"role":"user","content":"\ud83d"}]"#,
        ] {
            assert!(scan(line).is_err(), "{line}");
        }
        let e = reference(r#"{"messages":[{"role":"user","content":"x","n":[1,1e400]}]}"#).unwrap_err();
        assert_eq!(e.0, "messages[0].n[1]");
        assert_eq!(
            e.1, "1e+400 is not a finite float",
            "the wording of MessageArray.from_json"
        );
        assert!(reference(&deep(10_000)).is_err());
        assert!(cross_check(&deep(90)));
    }

    #[test]
    fn mutated_lines_get_the_reference_answer() {
        // A bounded, seeded campaign: each good line with a byte sequence inserted, a byte
        // removed, or a span repeated, at a pseudo-random place.
        let seeds = [
            r#"{"id":1,"messages":[{"role":"user","content":"h\u00e9 \ud83d\ude00"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":[1.5,-2,true,null]}],"meta":{"k":[1e5]}}"#,
            r#"[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"},{"role":"user","content":[{"type":"text","text":"a"}]}]"#,
        ];
        let pieces = [
            ",",
            ":",
            "[",
            "]",
            "{",
            "}",
            "\"",
            "\\",
            " ",
            "0",
            "-",
            "e",
            "1e400",
            "\\ud800",
            "\t",
            "\u{1}",
            "é",
            "null",
            "\"role\":\"user\",",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut accepted = 0;
        for round in 0..3000 {
            let seed = seeds[round % seeds.len()];
            let boundaries: Vec<usize> = (0..=seed.len()).filter(|&i| seed.is_char_boundary(i)).collect();
            let at = boundaries[next(boundaries.len())];
            let line = match next(3) {
                0 => format!("{}{}{}", &seed[..at], pieces[next(pieces.len())], &seed[at..]),
                1 => {
                    let end = boundaries.iter().copied().find(|&b| b > at).unwrap_or(at);
                    format!("{}{}", &seed[..at], &seed[end..])
                }
                _ => {
                    let end = boundaries[next(boundaries.len())].max(at);
                    format!("{}{}", &seed[..end], &seed[at..])
                }
            };
            accepted += usize::from(cross_check(&line));
        }
        assert!(accepted > 100, "the campaign should keep some lines good: {accepted}");
    }

    #[test]
    fn every_prefix_of_a_good_line_gets_the_reference_answer() {
        let line = r#"{"id":"é","messages":[{"role":"user","content":"h\u00e9 \ud83d\ude00"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":[1.5,-2,true]}]}"#;
        for (i, _) in line.char_indices() {
            cross_check(&line[..i]);
        }
        assert!(cross_check(line));
    }
}
