//! One validating pass over a Pod's JSON that measures it and finds its fields.
//!
//! Reading an inventory is the planner's whole cost, and the rules need only a dozen small fields
//! of each Pod. [`skim`] checks the text is JSON (RFC 8259), computes the length it has in the
//! canonical archive layout (see [`crate::pyjson`]) and records the members of the top-level
//! object and of its object members, without allocating per value. The fields are then read
//! from their own small slices. Strings, most of the bytes, are crossed with SIMD search.

use thiserror::Error;

use crate::pyjson;

/// Text that is not JSON.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("not JSON at byte {at}: {what}")]
pub struct SkimError {
    /// Byte offset of the problem.
    pub at: usize,
    /// What was expected or found.
    pub what: &'static str,
}

/// A member of the top-level object (`parent == None`) or of an object nested in it through
/// object members (`parent` is the index of the member holding that object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    /// Index of the enclosing member, for members one level down.
    pub parent: Option<usize>,
    /// The key's JSON text, quotes included.
    pub key: &'a str,
    /// The value's JSON text.
    pub value: &'a str,
    /// The value's canonical length.
    pub canonical_len: usize,
    /// Whether the key's text holds an escape (and must be decoded to compare).
    pub escaped: bool,
}

impl Member<'_> {
    /// Whether the key is `name` (keys with escapes are decoded first).
    #[inline]
    pub fn key_is(&self, name: &str) -> bool {
        &self.key[1..self.key.len() - 1] == name
            || (self.escaped && serde_json::from_str::<String>(self.key).is_ok_and(|k| k == name))
    }
}

/// The value of `key` among `members` with `parent` (the last one, as Python keeps it).
#[inline]
pub fn member<'a>(
    members: &[Member<'a>],
    parent: Option<usize>,
    key: &str,
) -> Option<(usize, Member<'a>)> {
    members
        .iter()
        .enumerate()
        .rev()
        .find(|(_, m)| m.parent == parent && m.key_is(key))
        .map(|(i, m)| (i, *m))
}

const MAX_DEPTH: usize = 512;

/// Which members of a value a skim records: named keys (each with the schema of its value),
/// optionally every key, and for an array its elements.
#[derive(Debug)]
pub struct Schema {
    /// Keys to record, each with the schema of its value.
    pub keys: &'static [(&'static str, Schema)],
    /// Record every other key too (without looking inside its value).
    pub any: bool,
    /// For an array: record each element (key `""`) with this schema.
    pub elements: Option<&'static Schema>,
}

impl Schema {
    /// Records nothing inside the value.
    pub const LEAF: Schema = Schema {
        keys: &[],
        any: false,
        elements: None,
    };
    /// Records every member of an object, nothing deeper.
    pub const ANY: Schema = Schema {
        keys: &[],
        any: true,
        elements: None,
    };

    fn child(&self, key: &str, escaped: bool) -> Option<&Schema> {
        let inner = &key[1..key.len() - 1];
        let found = self.keys.iter().find(|(k, _)| *k == inner).map(|(_, s)| s);
        let found = found.or_else(|| {
            // An escaped key: decode it and look again.
            if !escaped {
                return None;
            }
            let decoded: String = serde_json::from_str(key).ok()?;
            self.keys
                .iter()
                .find(|(k, _)| *k == decoded)
                .map(|(_, s)| s)
        });
        found.or(if self.any { Some(&Schema::LEAF) } else { None })
    }
}

/// Validates `text` as one JSON value, returns its canonical length, and fills `members`.
///
/// # Errors
/// [`SkimError`] at the first byte that is not JSON.
pub fn skim<'a>(
    text: &'a str,
    schema: &Schema,
    members: &mut Vec<Member<'a>>,
) -> Result<usize, SkimError> {
    let incomplete = || SkimError {
        at: text.len(),
        what: "unexpected end",
    };
    let (end, len) =
        skim_prefix(text, schema, members).map_err(|e| e.unwrap_or_else(incomplete))?;
    if !text[end..]
        .bytes()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        return Err(SkimError {
            at: end,
            what: "trailing characters",
        });
    }
    Ok(len)
}

/// The members recorded under `parent`, in order (the elements of an array, for one).
pub fn children<'m, 'a>(
    members: &'m [Member<'a>],
    parent: usize,
) -> impl Iterator<Item = (usize, Member<'a>)> + 'm {
    members
        .iter()
        .enumerate()
        .skip(parent + 1)
        .filter(move |(_, m)| m.parent == Some(parent))
        .map(|(i, m)| (i, *m))
}

/// Skims the value that starts `text`: `Ok((end, canonical_len))`, filling `members`.
///
/// # Errors
/// `Err(None)` when `text` ends before the value does (more text may complete it), and
/// `Err(Some(e))` at the first byte that is not JSON.
pub fn skim_prefix<'a>(
    text: &'a str,
    schema: &Schema,
    members: &mut Vec<Member<'a>>,
) -> Result<(usize, usize), Option<SkimError>> {
    members.clear();
    let mut s = Skimmer {
        text,
        b: text.as_bytes(),
        i: 0,
        members,
        escaped: false,
    };
    s.ws();
    let number = matches!(s.b.get(s.i), Some(b'-' | b'0'..=b'9'));
    match s.value(0, Some((None, schema))) {
        // A number that reaches the end may go on in the next chunk.
        Ok(_) if number && s.i == text.len() => Err(None),
        Ok(len) => Ok((s.i, len)),
        Err(e) if e.at >= text.len() => Err(None),
        Err(e) => Err(Some(e)),
    }
}

/// The canonical length of `text`, which must be JSON.
///
/// # Errors
/// [`SkimError`] when it is not.
pub fn canonical_len(text: &str) -> Result<usize, SkimError> {
    skim(text, &Schema::LEAF, &mut Vec::new())
}

struct Skimmer<'a, 'm> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    members: &'m mut Vec<Member<'a>>,
    /// Whether the last string read held an escape.
    escaped: bool,
}

/// Bytes a string holds as they are written: printable ASCII but `"` and `\`.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 0x7f {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

/// Whether eight bytes are all [`PLAIN`], tested as one word.
#[inline]
fn plain8(chunk: &[u8]) -> bool {
    let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    // Below 0x20, at or above 0x7f, a quote or a backslash.
    let low = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    let high = (w.wrapping_add(ONES) | w) & HIGH;
    let quote = has_zero(w ^ (ONES * u64::from(b'"')));
    let slash = has_zero(w ^ (ONES * u64::from(b'\\')));
    (low | high | quote | slash) == 0
}

/// Where a value's members go: `Some((parent, schema))` records those `schema` names with
/// `parent`.
type Record<'s> = Option<(Option<usize>, &'s Schema)>;

impl<'a> Skimmer<'a, '_> {
    fn err(&self, what: &'static str) -> SkimError {
        SkimError { at: self.i, what }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn value(&mut self, depth: usize, record: Record<'_>) -> Result<usize, SkimError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        match self.b.get(self.i) {
            Some(b'{') => self.object(depth, record),
            Some(b'[') => self.array(depth, record),
            Some(b'"') => self.string(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            _ => Err(self.err("expected a value")),
        }
    }

    fn literal(&mut self, word: &'static str) -> Result<usize, SkimError> {
        let rest = &self.b[self.i..];
        if rest.starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(word.len())
        } else if word.as_bytes().starts_with(rest) {
            Err(SkimError {
                at: self.b.len(),
                what: "unexpected end",
            })
        } else {
            Err(self.err("expected true, false or null"))
        }
    }

    fn object(&mut self, depth: usize, record: Record<'_>) -> Result<usize, SkimError> {
        self.i += 1;
        let mut len = 2;
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(len);
        }
        loop {
            if self.b.get(self.i) != Some(&b'"') {
                return Err(self.err("expected a key"));
            }
            let key_start = self.i;
            len += self.string()? + 1;
            let key = &self.text[key_start..self.i];
            let escaped = self.escaped;
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return Err(self.err("expected ':'"));
            }
            self.i += 1;
            self.ws();
            let value_start = self.i;
            let wanted =
                record.and_then(|(parent, schema)| Some((parent, schema.child(key, escaped)?)));
            let (slot, child) = match wanted {
                Some((parent, schema)) => {
                    self.members.push(Member {
                        parent,
                        key,
                        value: "",
                        canonical_len: 0,
                        escaped,
                    });
                    let slot = self.members.len() - 1;
                    (Some(slot), Some((Some(slot), schema)))
                }
                None => (None, None),
            };
            len += self.recorded_value(depth, child, slot, value_start)?;
            if self.next_or_close(b'}', "expected ',' or '}'", &mut len)? {
                return Ok(len);
            }
        }
    }

    /// A member's or element's value from `start`, recorded in `slot` when there is one; its
    /// canonical length.
    #[inline]
    fn recorded_value(
        &mut self,
        depth: usize,
        child: Record<'_>,
        slot: Option<usize>,
        start: usize,
    ) -> Result<usize, SkimError> {
        let value_len = self.value(depth + 1, child)?;
        if let Some(slot) = slot {
            self.members[slot].value = &self.text[start..self.i];
            self.members[slot].canonical_len = value_len;
        }
        Ok(value_len)
    }

    /// After a member or an element: a `,` (`false`: more follow; it counts in `len`) or the
    /// `close` byte (`true`).
    #[inline]
    fn next_or_close(
        &mut self,
        close: u8,
        expected: &'static str,
        len: &mut usize,
    ) -> Result<bool, SkimError> {
        self.ws();
        match self.b.get(self.i) {
            Some(b',') => {
                self.i += 1;
                *len += 1;
                self.ws();
                Ok(false)
            }
            Some(&c) if c == close => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(self.err(expected)),
        }
    }

    fn array(&mut self, depth: usize, record: Record<'_>) -> Result<usize, SkimError> {
        self.i += 1;
        let mut len = 2;
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(len);
        }
        // Elements are recorded with an empty key when the schema asks for them.
        let elements = record.and_then(|(parent, schema)| Some((parent, schema.elements?)));
        loop {
            let start = self.i;
            let slot = elements.map(|(parent, _)| {
                self.members.push(Member {
                    parent,
                    key: "\"\"",
                    value: "",
                    canonical_len: 0,
                    escaped: false,
                });
                self.members.len() - 1
            });
            let child = elements
                .zip(slot)
                .map(|((_, schema), slot)| (Some(slot), schema));
            len += self.recorded_value(depth, child, slot, start)?;
            if self.next_or_close(b']', "expected ',' or ']'", &mut len)? {
                return Ok(len);
            }
        }
    }

    /// A string at `self.i` (on its quote); its canonical length with quotes.
    fn string(&mut self) -> Result<usize, SkimError> {
        self.escaped = false;
        let b = self.b;
        let mut i = self.i + 1;
        let mut len = 2;
        loop {
            // Printable ASCII other than `"` and `\` is written as is: the common case.
            let start = i;
            let mut words = b[i..].chunks_exact(8);
            for w in &mut words {
                if !plain8(w) {
                    break;
                }
                i += 8;
            }
            i += b[i..]
                .iter()
                .take_while(|&&c| PLAIN[usize::from(c)])
                .count();
            len += i - start;
            match b.get(i) {
                None => {
                    return Err(SkimError {
                        at: b.len(),
                        what: "unterminated string",
                    });
                }
                Some(b'"') => {
                    self.i = i + 1;
                    return Ok(len);
                }
                Some(b'\\') => {
                    self.i = i;
                    self.escaped = true;
                    len += self.escape()?;
                    i = self.i;
                }
                Some(&c) if c < 0x20 => {
                    self.i = i;
                    return Err(self.err("control character in string"));
                }
                Some(_) => {
                    let c = self.text[i..].chars().next().unwrap_or('\0');
                    len += pyjson::escaped_len(c as u32);
                    i += c.len_utf8();
                }
            }
        }
    }

    /// An escape at `self.i` (on its backslash); the canonical length of the character.
    fn escape(&mut self) -> Result<usize, SkimError> {
        let Some(&e) = self.b.get(self.i + 1) else {
            return Err(SkimError {
                at: self.b.len(),
                what: "unterminated escape",
            });
        };
        let len = match e {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
            b'/' => 1,
            b'u' => {
                let unit = self.hex4(self.i + 2)?;
                if (0xD800..0xDC00).contains(&unit)
                    && self
                        .b
                        .get(self.i + 6..)
                        .is_some_and(|r| r.starts_with(b"\\u"))
                {
                    let low = self.hex4(self.i + 8)?;
                    if (0xDC00..0xE000).contains(&low) {
                        self.i += 12;
                        return Ok(12);
                    }
                }
                self.i += 6;
                return Ok(pyjson::escaped_len(unit));
            }
            _ => return Err(self.err("invalid escape")),
        };
        self.i += 2;
        Ok(len)
    }

    fn hex4(&self, at: usize) -> Result<u32, SkimError> {
        if at + 4 > self.b.len() {
            return Err(SkimError {
                at: self.b.len(),
                what: "unterminated escape",
            });
        }
        self.b
            .get(at..at + 4)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())
            .ok_or_else(|| self.err("invalid \\u escape"))
    }

    /// A number; its canonical length (an `int` keeps its digits, a float takes Python's repr).
    fn number(&mut self) -> Result<usize, SkimError> {
        let start = self.i;
        let digits = |s: &mut Self| {
            let from = s.i;
            while s.b.get(s.i).is_some_and(u8::is_ascii_digit) {
                s.i += 1;
            }
            s.i - from
        };
        if self.b[self.i] == b'-' {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err("invalid number")),
        }
        let mut float = false;
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            float = true;
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.i) {
            self.i += 1;
            float = true;
            if let Some(b'+' | b'-') = self.b.get(self.i) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        let token = &self.text[start..self.i];
        Ok(if float {
            let mut s = String::new();
            pyjson::write_float(&mut s, token.parse().unwrap_or(f64::NAN));
            s.len()
        } else if token == "-0" {
            1
        } else {
            token.len()
        })
    }
}

#[cfg(test)]
mod tests;
