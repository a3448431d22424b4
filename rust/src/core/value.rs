//! The stored form of a message: a compact, self-contained byte encoding of a JSON value.
//!
//! A message is written once by an [`Encoder`] and read many times as a [`ValueRef`] without
//! copying. Containers carry their byte length so a reader can skip a value in O(1), which keeps
//! field lookups (role, content, tool calls) cheap. Well-known keys take one byte.
//!
//! Layout: a tag byte, then
//! - `NULL`, `FALSE`, `TRUE`: nothing;
//! - `INT`: 8 bytes, little-endian `i64`; `FLOAT`: 8 bytes, the `f64` bits;
//! - `STR`, `BIG_INT`: a varint length and that many bytes (UTF-8; a big int in decimal);
//! - `LIST`, `DICT`: a varint item count and a `u32` byte length of the items; a dict item is a
//!   key (one byte: a well-known key's code, or `INLINE_KEY`, a varint length and the bytes)
//!   followed by its value.
//!
//! One encoded value is at most [`MAX_VALUE_BYTES`] (4 GiB - 1): container lengths, and the
//! arena's spans, are 32-bit. [`read_within`] refuses a larger one before anything reads it.

use serde_json::Value as Json;

/// The largest encoding of one value (a message): its container lengths and the arena's spans
/// are `u32`, so a larger value could not be read back.
pub const MAX_VALUE_BYTES: usize = u32::MAX as usize;

/// The value encoded at the start of `bytes`, which must be its whole encoding, if that is at
/// most `limit` bytes ([`MAX_VALUE_BYTES`] but in tests); otherwise what is wrong, in words
/// ("is 5000000000 bytes once encoded, over the limit of ..."). Checked before the value is read,
/// so a length that saturated on the way in ([`Encoder::close`]) is never used.
pub fn read_within(bytes: &[u8], limit: usize) -> Result<ValueRef<'_>, String> {
    if bytes.len() > limit {
        let named = if limit == MAX_VALUE_BYTES { " (4 GiB - 1)" } else { "" };
        return Err(format!(
            "is {} bytes once encoded, over the limit of {limit} bytes{named} on one message",
            bytes.len()
        ));
    }
    Ok(ValueRef::new(bytes))
}

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const FLOAT: u8 = 4;
const STR: u8 = 5;
const LIST: u8 = 6;
const DICT: u8 = 7;
const BIG_INT: u8 = 8;
const INLINE_KEY: u8 = 0xFF;

/// Keys common enough in chat messages to be stored as one byte. Never reorder: stored bytes
/// refer to these by position.
pub const WELL_KNOWN_KEYS: [&str; 16] = [
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "timestamp",
    "type",
    "text",
    "id",
    "function",
    "arguments",
    "input",
    "tool_use_id",
    "image_url",
    "url",
    "is_error",
];

/// The code of a well-known key. A `match` on the bytes (length first, then a compare), not a
/// search of [`WELL_KNOWN_KEYS`]: every key of every message passes through here.
fn well_known_code(key: &str) -> Option<u8> {
    let code = match key.as_bytes() {
        b"role" => 0,
        b"content" => 1,
        b"tool_calls" => 2,
        b"tool_call_id" => 3,
        b"name" => 4,
        b"timestamp" => 5,
        b"type" => 6,
        b"text" => 7,
        b"id" => 8,
        b"function" => 9,
        b"arguments" => 10,
        b"input" => 11,
        b"tool_use_id" => 12,
        b"image_url" => 13,
        b"url" => 14,
        b"is_error" => 15,
        _ => return None,
    };
    Some(code)
}

/// Writes values into a byte buffer. Containers are opened with their item count and closed
/// once their items are written, which fills in their byte length.
pub struct Encoder<'a> {
    buf: &'a mut Vec<u8>,
}

/// Where an open container's byte length must be written when it closes.
#[derive(Debug, Clone, Copy)]
pub struct Open(usize);

impl<'a> Encoder<'a> {
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Self { buf }
    }

    fn varint(&mut self, mut n: usize) {
        while n >= 0x80 {
            self.buf.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.buf.push(n as u8);
    }

    pub fn null(&mut self) {
        self.buf.push(NULL);
    }

    pub fn bool(&mut self, b: bool) {
        self.buf.push(if b { TRUE } else { FALSE });
    }

    pub fn int(&mut self, i: i64) {
        self.buf.push(INT);
        self.buf.extend_from_slice(&i.to_le_bytes());
    }

    pub fn float(&mut self, f: f64) {
        self.buf.push(FLOAT);
        self.buf.extend_from_slice(&f.to_bits().to_le_bytes());
    }

    /// An integer outside `i64`, in decimal (an optional `-` and digits).
    pub fn big_int(&mut self, decimal: &str) {
        self.buf.push(BIG_INT);
        self.varint(decimal.len());
        self.buf.extend_from_slice(decimal.as_bytes());
    }

    pub fn str(&mut self, s: &str) {
        self.buf.push(STR);
        self.varint(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// A dict key; returns its well-known code, if it has one (an inline key has none).
    pub fn key(&mut self, key: &str) -> Option<u8> {
        let code = well_known_code(key);
        if let Some(code) = code {
            self.buf.push(code);
        } else {
            self.buf.push(INLINE_KEY);
            self.varint(key.len());
            self.buf.extend_from_slice(key.as_bytes());
        }
        code
    }

    fn open(&mut self, tag: u8, count: usize) -> Open {
        self.buf.push(tag);
        self.varint(count);
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        Open(at)
    }

    /// Open a list of `count` values; write them, then [`Encoder::close`].
    pub fn open_list(&mut self, count: usize) -> Open {
        self.open(LIST, count)
    }

    /// Open a dict of `count` items; write `key` then the value for each, then [`Encoder::close`].
    pub fn open_dict(&mut self, count: usize) -> Open {
        self.open(DICT, count)
    }

    /// Fill in the byte length of a container. A length over `u32::MAX` is written as
    /// `u32::MAX` (it never wraps to a small one); [`read_within`] refuses such a value.
    pub fn close(&mut self, open: Open) {
        let len = u32::try_from(self.buf.len() - open.0 - 4).unwrap_or(u32::MAX);
        self.buf[open.0..open.0 + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Open a list whose item count is known only at its end: write the items, then
    /// [`Encoder::close_counted`]. The result is byte for byte what [`Encoder::open_list`] writes.
    pub fn open_list_uncounted(&mut self) -> Open {
        self.open(LIST, 0)
    }

    /// Open a dict whose item count is known only at its end (see [`Encoder::open_list_uncounted`]).
    pub fn open_dict_uncounted(&mut self) -> Open {
        self.open(DICT, 0)
    }

    /// Close a container opened uncounted, now that its `count` is known. O(1) for fewer than
    /// 128 items; a longer count's varint moves the items up by its extra bytes.
    pub fn close_counted(&mut self, open: Open, count: usize) {
        let at = open.0 - 1;
        if count >= 0x80 {
            let mut varint = Vec::with_capacity(5);
            Encoder::new(&mut varint).varint(count);
            self.buf.splice(at..=at, varint.iter().copied());
            self.close(Open(open.0 + varint.len() - 1));
        } else {
            self.buf[at] = count as u8;
            self.close(open);
        }
    }

    /// Copy an already encoded value.
    pub fn raw(&mut self, value: ValueRef<'_>) {
        self.buf.extend_from_slice(value.bytes);
    }

    /// A test fixture: one OpenAI tool call `{id, type: "function", function: {name: "f",
    /// arguments: "{}"}}`.
    #[cfg(test)]
    pub fn tool_call(&mut self, id: &str) {
        let call = self.open_dict(3);
        self.key("id");
        self.str(id);
        self.key("type");
        self.str("function");
        self.key("function");
        let function = self.open_dict(2);
        self.key("name");
        self.str("f");
        self.key("arguments");
        self.str("{}");
        self.close(function);
        self.close(call);
    }
}

/// A borrowed view of one encoded value.
#[derive(Clone, Copy, Debug)]
pub struct ValueRef<'a> {
    /// The whole encoding of this value, tag included.
    bytes: &'a [u8],
}

/// What a value is, with its payload borrowed from the encoding.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    BigInt(&'a str),
    Str(&'a str),
    List(Items<'a>),
    Dict(Items<'a>),
}

/// A dict key: its name, and its index in [`WELL_KNOWN_KEYS`] if it is one of those.
#[derive(Clone, Copy, Debug)]
pub struct Key<'a> {
    pub code: Option<usize>,
    pub name: &'a str,
}

/// The items of a list or dict: a count and their encoding.
#[derive(Clone, Copy, Debug)]
pub struct Items<'a> {
    pub count: usize,
    bytes: &'a [u8],
}

#[inline]
fn read_varint(bytes: &[u8], pos: &mut usize) -> usize {
    // Most lengths and counts are under 128: one byte.
    let first = bytes[*pos];
    if first < 0x80 {
        *pos += 1;
        return usize::from(first);
    }
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let b = bytes[*pos];
        *pos += 1;
        n |= usize::from(b & 0x7F) << shift;
        if b < 0x80 {
            return n;
        }
        shift += 7;
    }
}

fn read_u32(bytes: &[u8], pos: usize) -> usize {
    u32::from_le_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]]) as usize
}

fn read_8(bytes: &[u8], pos: usize) -> [u8; 8] {
    let mut b = [0; 8];
    b.copy_from_slice(&bytes[pos..pos + 8]);
    b
}

#[allow(unsafe_code)]
fn utf8(bytes: &[u8]) -> &str {
    // SAFETY: every string and key in an encoding was written by `Encoder` from a `&str` (or
    // parsed JSON text, which serde_json has already checked), and encodings are never modified
    // afterwards, so these bytes are valid UTF-8. Skipping the check halves the cost of reading
    // long message texts back out.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

/// The byte length of the value starting at `bytes[pos]`.
#[inline]
fn value_len(bytes: &[u8], pos: usize) -> usize {
    let mut p = pos + 1;
    match bytes[pos] {
        INT | FLOAT => 9,
        STR | BIG_INT => {
            let n = read_varint(bytes, &mut p);
            p + n - pos
        }
        LIST | DICT => {
            read_varint(bytes, &mut p);
            let n = read_u32(bytes, p);
            p + 4 + n - pos
        }
        _ => 1,
    }
}

impl<'a> ValueRef<'a> {
    /// A view of the encoded value that starts at the beginning of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        let len = value_len(bytes, 0);
        Self { bytes: &bytes[..len] }
    }

    pub fn bytes(self) -> &'a [u8] {
        self.bytes
    }

    pub fn get(self) -> Value<'a> {
        let b = self.bytes;
        let mut p = 1;
        match b[0] {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            INT => Value::Int(i64::from_le_bytes(read_8(b, 1))),
            FLOAT => Value::Float(f64::from_bits(u64::from_le_bytes(read_8(b, 1)))),
            STR | BIG_INT => {
                let n = read_varint(b, &mut p);
                let s = utf8(&b[p..p + n]);
                if b[0] == STR { Value::Str(s) } else { Value::BigInt(s) }
            }
            tag => {
                let count = read_varint(b, &mut p);
                let items = Items {
                    count,
                    bytes: &b[p + 4..],
                };
                if tag == LIST {
                    Value::List(items)
                } else {
                    Value::Dict(items)
                }
            }
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self.get() {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_dict(self) -> Option<Items<'a>> {
        match self.get() {
            Value::Dict(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_list(self) -> Option<Items<'a>> {
        match self.get() {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn is_null(self) -> bool {
        matches!(self.get(), Value::Null)
    }

    /// The value under `key` when this is a dict.
    pub fn field(self, key: &str) -> Option<ValueRef<'a>> {
        self.as_dict()?.field(key)
    }
}

impl<'a> Items<'a> {
    /// The values of a list.
    pub fn values(self) -> impl Iterator<Item = ValueRef<'a>> {
        let bytes = self.bytes;
        let mut pos = 0;
        (0..self.count).map(move |_| {
            let len = value_len(bytes, pos);
            let v = ValueRef {
                bytes: &bytes[pos..pos + len],
            };
            pos += len;
            v
        })
    }

    /// The key/value pairs of a dict, in insertion order.
    pub fn entries(self) -> impl Iterator<Item = (&'a str, ValueRef<'a>)> {
        self.keyed_entries().map(|(key, v)| (key.name, v))
    }

    /// The entries with each key's well-known code, for readers that cache those keys.
    pub fn keyed_entries(self) -> impl Iterator<Item = (Key<'a>, ValueRef<'a>)> {
        let bytes = self.bytes;
        let mut pos = 0;
        (0..self.count).map(move |_| {
            let code = bytes[pos];
            pos += 1;
            let key = if code == INLINE_KEY {
                let n = read_varint(bytes, &mut pos);
                let name = utf8(&bytes[pos..pos + n]);
                pos += n;
                Key { code: None, name }
            } else {
                Key {
                    code: Some(code as usize),
                    name: WELL_KNOWN_KEYS[code as usize],
                }
            };
            let len = value_len(bytes, pos);
            let v = ValueRef {
                bytes: &bytes[pos..pos + len],
            };
            pos += len;
            (key, v)
        })
    }

    /// The value under `key` in a dict (the first, should a key repeat).
    pub fn field(self, key: &str) -> Option<ValueRef<'a>> {
        self.entries().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// Write one encoded value as compact JSON text (`{"a":1,"b":[2,3]}`).
pub fn write_value(out: &mut String, value: ValueRef<'_>) {
    write_json(out, value, ",", ":");
}

/// Write one encoded value as JSON text the way Python's `json.dumps(value, ensure_ascii=False)`
/// writes it (`{"a": 1, "b": [2, 3]}`).
pub fn write_python_json(out: &mut String, value: ValueRef<'_>) {
    write_json(out, value, ", ", ": ");
}

fn write_json(out: &mut String, value: ValueRef<'_>, item_sep: &str, key_sep: &str) {
    match value.get() {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::BigInt(s) => out.push_str(s),
        Value::Float(f) => out.push_str(&serde_json::Value::from(f).to_string()),
        Value::Str(s) => write_json_str(out, s),
        Value::List(items) => {
            out.push('[');
            for (i, v) in items.values().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                write_json(out, v, item_sep, key_sep);
            }
            out.push(']');
        }
        Value::Dict(items) => {
            out.push('{');
            for (i, (k, v)) in items.entries().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                write_json_str(out, k);
                out.push_str(key_sep);
                write_json(out, v, item_sep, key_sep);
            }
            out.push('}');
        }
    }
}

/// Write a string as a JSON string literal.
pub fn write_json_str(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// Encode a parsed JSON value.
pub fn encode_json(e: &mut Encoder<'_>, value: &Json) {
    match value {
        Json::Null => e.null(),
        Json::Bool(b) => e.bool(*b),
        Json::Number(n) => encode_number(e, n),
        Json::String(s) => e.str(s),
        Json::Array(items) => {
            let open = e.open_list(items.len());
            for v in items {
                encode_json(e, v);
            }
            e.close(open);
        }
        Json::Object(map) => {
            let open = e.open_dict(map.len());
            for (k, v) in map {
                e.key(k);
                encode_json(e, v);
            }
            e.close(open);
        }
    }
}

fn encode_number(e: &mut Encoder<'_>, n: &serde_json::Number) {
    encode_number_text(e, &n.to_string());
}

/// Encode a JSON number given as its text: a float if it has a fraction or an exponent, else an
/// `i64`, else a big int in decimal.
pub fn encode_number_text(e: &mut Encoder<'_>, text: &str) {
    if text.contains(['.', 'e', 'E']) {
        e.float(text.parse().unwrap_or(f64::NAN));
    } else if let Ok(i) = text.parse::<i64>() {
        e.int(i);
    } else {
        e.big_int(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut buf = Vec::new();
        let mut e = Encoder::new(&mut buf);
        let d = e.open_dict(4);
        e.key("role");
        e.str("assistant");
        e.key("content");
        e.null();
        e.key("x-custom");
        let l = e.open_list(4);
        e.int(-7);
        e.float(1.5);
        e.big_int("123456789012345678901234567890");
        e.str("你好");
        e.close(l);
        e.key("ok");
        e.bool(true);
        e.close(d);
        buf
    }

    #[test]
    fn round_trips_every_kind_of_value_in_order() {
        let buf = sample();
        let v = ValueRef::new(&buf);
        assert_eq!(v.bytes().len(), buf.len());
        let keys: Vec<&str> = v.as_dict().unwrap().entries().map(|(k, _)| k).collect();
        assert_eq!(keys, ["role", "content", "x-custom", "ok"]);
        assert_eq!(v.field("role").unwrap().as_str(), Some("assistant"));
        assert!(v.field("content").unwrap().is_null());
        let list: Vec<Value> = v
            .field("x-custom")
            .unwrap()
            .as_list()
            .unwrap()
            .values()
            .map(ValueRef::get)
            .collect();
        assert!(matches!(list[0], Value::Int(-7)));
        assert!(matches!(list[1], Value::Float(f) if f == 1.5));
        assert!(matches!(list[2], Value::BigInt("123456789012345678901234567890")));
        assert!(matches!(list[3], Value::Str("你好")));
        assert!(matches!(v.field("ok").unwrap().get(), Value::Bool(true)));
        assert!(v.field("missing").is_none());
    }

    #[test]
    fn a_value_over_4_gib_is_refused_before_it_is_read() {
        // Zeroed memory is mapped lazily: these 4 GiB are never touched.
        let huge = vec![0u8; MAX_VALUE_BYTES + 1];
        let err = read_within(&huge, MAX_VALUE_BYTES).unwrap_err();
        assert_eq!(
            err,
            "is 4294967296 bytes once encoded, over the limit of 4294967295 bytes (4 GiB - 1) on one message"
        );
        let buf = sample();
        assert!(read_within(&buf, buf.len()).is_ok());
        assert!(read_within(&buf, buf.len() - 1).is_err());
    }

    #[test]
    fn every_well_known_key_has_its_position_as_code() {
        for (i, key) in WELL_KNOWN_KEYS.iter().enumerate() {
            assert_eq!(well_known_code(key), Some(i as u8), "{key}");
        }
        for other in ["", "rol", "roles", "Role", "contents", "tool_call", "x-custom"] {
            assert_eq!(well_known_code(other), None, "{other}");
        }
    }

    #[test]
    fn long_strings_use_multi_byte_lengths() {
        let text = "é".repeat(70_000);
        let mut buf = Vec::new();
        Encoder::new(&mut buf).str(&text);
        assert_eq!(ValueRef::new(&buf).as_str(), Some(text.as_str()));
    }
}
