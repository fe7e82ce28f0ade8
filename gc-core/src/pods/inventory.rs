//! Pod inventories as streams: `kubectl get pods -o json` output and the reference flow's shape.
//!
//! [`Reader`] takes the text in chunks of any size ([`Reader::feed`]) and turns each Pod into
//! [`PodFacts`] as soon as its last byte arrives; the JSON itself is dropped, so memory holds one
//! Pod's text at a time plus the facts. Both shapes are accepted: the flow's
//! `{"size": N, "metadataItems": [meta...], "statusItems": [{"status": ...}...]}`, paired by
//! position (in either key order), and a list `{"items": [{"metadata": ..., "status": ...}...]}`.
//! Top-level values other than those are skipped without being kept.

use thiserror::Error;

use crate::pods::facts::{self as pod, BadField, MetaFacts, PodFacts, Rules, StatusFacts};
use crate::pods::skim::{self, Member, Schema, member};
use crate::raw::Raw;

/// An inventory that cannot be read as either shape.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InventoryError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("malformed inventory: {0}")]
    Malformed(String),
    /// The flow's shape with missing or unequal `metadataItems` / `statusItems`.
    #[error("incomplete native Pod inventory: {0}")]
    Incomplete(&'static str),
}

fn malformed(what: impl Into<String>) -> InventoryError {
    InventoryError::Malformed(what.into())
}

/// The top-level keys the reader looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Size,
    MetadataItems,
    StatusItems,
    Items,
    Other,
}

impl Key {
    fn from_text(text: &str) -> Self {
        match text {
            "size" => Self::Size,
            "metadataItems" => Self::MetadataItems,
            "statusItems" => Self::StatusItems,
            "items" => Self::Items,
            _ => Self::Other,
        }
    }
    fn is_list(self) -> bool {
        matches!(self, Self::MetadataItems | Self::StatusItems | Self::Items)
    }
}

/// Where the reader is in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Start,
    KeyOrEnd,
    Key,
    Colon(Key),
    Value(Key),
    /// Inside a list value: before an element or the closing bracket.
    Element(Key),
    /// Inside a list value, after a comma: before an element.
    NextElement(Key),
    AfterElement(Key),
    AfterValue,
    End,
}

/// A list read so far: facts, or only a count once past the ceiling.
#[derive(Debug)]
struct List<T> {
    present: bool,
    not_a_list: bool,
    items: Vec<T>,
    count: usize,
}

impl<T> Default for List<T> {
    fn default() -> Self {
        Self {
            present: false,
            not_a_list: false,
            items: Vec::new(),
            count: 0,
        }
    }
}

impl<T> List<T> {
    fn restart(&mut self, is_list: bool, capacity: usize) {
        let items = Vec::with_capacity(if is_list { capacity } else { 0 });
        *self = Self {
            present: true,
            not_a_list: !is_list,
            items,
            count: 0,
        };
    }

    /// Counts one element, keeping what `read` makes of it while under `keep_at_most`.
    fn add(
        &mut self,
        keep_at_most: usize,
        read: impl FnOnce() -> Result<T, InventoryError>,
    ) -> Result<(), InventoryError> {
        if self.count < keep_at_most {
            self.items.push(read()?);
        }
        self.count += 1;
        Ok(())
    }
}

/// A streaming inventory reader. Feed it the text, then [`Reader::finish`].
#[derive(Debug)]
pub struct Reader<'c> {
    rules: Rules<'c>,
    keep_at_most: usize,
    /// Text not yet consumed: at most the value being read and the chunk that holds its end.
    buf: Vec<u8>,
    /// How many bytes of the text came before `buf` (so errors give offsets into the whole text).
    drained: usize,
    /// Do not try again before the buffer is this long (an incomplete value is not re-read for
    /// every small chunk).
    retry_at: usize,
    at: At,
    size_is_zero: bool,
    /// The inventory's `size`, to reserve room for its facts once.
    size_hint: usize,
    metas: List<Result<MetaFacts, Box<BadField>>>,
    statuses: List<Result<StatusFacts, ()>>,
    pods: List<PodFacts>,
}

/// What a step over the text did.
enum Step {
    /// Consumed up to here.
    Next(usize),
    /// The value starting here needs more text.
    NeedMore(usize),
}

/// A UTF-8 error as `std` words it, with the offset counted from the start of the whole text
/// (`offset` bytes came before the buffer that was checked).
fn utf8_error(e: &std::str::Utf8Error, offset: usize) -> InventoryError {
    let at = offset + e.valid_up_to();
    malformed(match e.error_len() {
        Some(n) => format!("invalid utf-8 sequence of {n} bytes from index {at}"),
        None => format!("incomplete utf-8 byte sequence from index {at}"),
    })
}

impl<'c> Reader<'c> {
    /// A reader applying `rules`, keeping facts for at most `keep_at_most` Pods (those past it are
    /// only counted, so an inventory over its ceiling costs no memory).
    pub fn new(rules: Rules<'c>, keep_at_most: usize) -> Self {
        Self {
            rules,
            keep_at_most,
            buf: Vec::new(),
            drained: 0,
            retry_at: 0,
            at: At::Start,
            size_is_zero: false,
            size_hint: 0,
            metas: List::default(),
            statuses: List::default(),
            pods: List::default(),
        }
    }

    /// Takes the next chunk of the inventory's text.
    ///
    /// # Errors
    /// [`InventoryError::Malformed`] as soon as the text cannot be an inventory.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), InventoryError> {
        self.buf.extend_from_slice(chunk);
        if self.buf.len() >= self.retry_at {
            self.consume()?;
        }
        Ok(())
    }

    /// Reads every complete value in the buffer and keeps the rest.
    fn consume(&mut self) -> Result<(), InventoryError> {
        let buf = std::mem::take(&mut self.buf);
        // A chunk may end inside a multi-byte character: read up to it.
        let text = match std::str::from_utf8(&buf) {
            Ok(text) => text,
            Err(e) if e.error_len().is_none() => std::str::from_utf8(&buf[..e.valid_up_to()])
                .map_err(|e| utf8_error(&e, self.drained))?,
            Err(e) => return Err(utf8_error(&e, self.drained)),
        };
        let mut members = Vec::new();
        let mut pos = 0;
        let kept = loop {
            match self.step(text, pos, &mut members)? {
                Step::Next(next) => pos = next,
                Step::NeedMore(from) => break from,
            }
        };
        self.buf = buf;
        self.buf.drain(..kept);
        self.drained += kept;
        self.retry_at = self.buf.len() * 2;
        Ok(())
    }

    /// One step of the top-level state machine from `pos`.
    fn step<'t>(
        &mut self,
        text: &'t str,
        pos: usize,
        members: &mut Vec<Member<'t>>,
    ) -> Result<Step, InventoryError> {
        let b = text.as_bytes();
        let Some(i) = b[pos..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .map(|i| pos + i)
        else {
            return Ok(Step::NeedMore(b.len()));
        };
        self.at = match (self.at, b[i]) {
            (At::Start, b'{') => At::KeyOrEnd,
            (At::Start, _) => return Err(malformed("expected a JSON object")),
            (At::KeyOrEnd | At::AfterValue, b'}') => At::End,
            (At::Colon(k), b':') => At::Value(k),
            (At::Value(k), b'[') if k.is_list() => {
                self.list_restart(k, true);
                At::Element(k)
            }
            (At::Element(_) | At::AfterElement(_), b']') => At::AfterValue,
            (At::AfterElement(k), b',') => At::NextElement(k),
            (At::AfterValue, b',') => At::Key,
            (At::KeyOrEnd | At::Key, b'"')
            | (At::Value(_) | At::Element(_) | At::NextElement(_), _) => {
                return match skim::skim_prefix(&text[i..], self.schema(), members) {
                    Ok((end, len)) => {
                        self.value(&text[i..i + end], members, len)?;
                        Ok(Step::Next(i + end))
                    }
                    Err(None) => Ok(Step::NeedMore(i)),
                    Err(Some(e)) => Err(malformed(format!(
                        "not JSON at byte {} of a value: {}",
                        e.at, e.what
                    ))),
                };
            }
            (at, c) => {
                return Err(malformed(format!(
                    "unexpected {:?} ({at:?})",
                    char::from(c)
                )));
            }
        };
        Ok(Step::Next(i + 1))
    }

    /// What to record of the value at the current position.
    fn schema(&self) -> &'static Schema {
        const STATUS_ITEM: Schema = Schema {
            keys: &[("status", pod::STATUS)],
            any: false,
            elements: None,
        };
        match self.at {
            At::Element(Key::MetadataItems) | At::NextElement(Key::MetadataItems) => &pod::METADATA,
            At::Element(Key::StatusItems) | At::NextElement(Key::StatusItems) => &STATUS_ITEM,
            At::Element(Key::Items) | At::NextElement(Key::Items) => &pod::POD,
            _ => &Schema::LEAF,
        }
    }

    fn list_restart(&mut self, key: Key, is_list: bool) {
        let hint = self.size_hint;
        match key {
            Key::MetadataItems => self.metas.restart(is_list, hint),
            Key::StatusItems => self.statuses.restart(is_list, hint),
            Key::Items => self.pods.restart(is_list, hint),
            Key::Size | Key::Other => {}
        }
    }

    /// A complete value in the current position, already skimmed into `members`.
    fn value(
        &mut self,
        text: &str,
        members: &[Member<'_>],
        len: usize,
    ) -> Result<(), InventoryError> {
        self.at = match self.at {
            At::KeyOrEnd | At::Key => {
                let key: String =
                    serde_json::from_str(text).map_err(|e| malformed(e.to_string()))?;
                At::Colon(Key::from_text(&key))
            }
            At::Value(key) => {
                if key == Key::Size {
                    // `payload.get('size') == 0`, which `0.0` and `false` also satisfy.
                    self.size_is_zero =
                        text.parse::<f64>().is_ok_and(|n| n == 0.0) || text == "false";
                    self.size_hint = text.parse::<usize>().unwrap_or(0).min(self.keep_at_most);
                }
                self.list_restart(key, false);
                At::AfterValue
            }
            At::Element(key) | At::NextElement(key) => {
                let (rules, keep_at_most) = (self.rules, self.keep_at_most);
                match key {
                    Key::MetadataItems => self.metas.add(keep_at_most, || {
                        Ok(MetaFacts::from_members(text, members, None, len, rules))
                    })?,
                    // `s.get('status')`: the element must be an object.
                    Key::StatusItems => self.statuses.add(keep_at_most, || {
                        Ok(text
                            .starts_with('{')
                            .then(|| status_facts(members, None))
                            .ok_or(()))
                    })?,
                    Key::Items => self.pods.add(keep_at_most, || {
                        let (i, m) = member(members, None, "metadata")
                            .ok_or_else(|| malformed("an element of items has no metadata"))?;
                        let meta = MetaFacts::from_members(
                            m.value,
                            members,
                            Some(i),
                            m.canonical_len,
                            rules,
                        );
                        Ok(PodFacts {
                            meta,
                            status: status_facts(members, None),
                        })
                    })?,
                    Key::Size | Key::Other => {}
                }
                At::AfterElement(key)
            }
            at => return Err(malformed(format!("unexpected value ({at:?})"))),
        };
        Ok(())
    }

    /// Ends the text and pairs what was read.
    ///
    /// # Errors
    /// [`InventoryError::Malformed`] for truncated text, a `statusItems` element that is not an
    /// object; [`InventoryError::Incomplete`] for the flow's shape with missing or unequal lists.
    pub fn finish(mut self) -> Result<Inventory, InventoryError> {
        self.consume()?;
        if self.at != At::End {
            return Err(malformed("truncated: the top-level object is not closed"));
        }
        if self.size_is_zero {
            return Ok(Inventory {
                pods: Vec::new(),
                count: 0,
            });
        }
        if !self.metas.present && !self.statuses.present && self.pods.present {
            if self.pods.not_a_list {
                return Err(malformed("items is not a list"));
            }
            return Ok(Inventory {
                count: self.pods.count,
                pods: self.pods.items,
            });
        }
        if !self.metas.present
            || !self.statuses.present
            || self.metas.not_a_list
            || self.statuses.not_a_list
        {
            return Err(InventoryError::Incomplete(
                "metadataItems and statusItems must both be lists",
            ));
        }
        if self.metas.count != self.statuses.count {
            return Err(InventoryError::Incomplete(
                "metadataItems and statusItems differ in length",
            ));
        }
        let pods = self
            .metas
            .items
            .into_iter()
            .zip(self.statuses.items)
            .enumerate()
            .map(|(i, (meta, status))| match status {
                Ok(status) => Ok(PodFacts { meta, status }),
                Err(()) => Err(malformed(format!("statusItems[{i}] is not an object"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Inventory {
            pods,
            count: self.metas.count,
        })
    }
}

/// A read inventory: the Pods' facts in order, and how many Pods it held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    /// Facts of the first Pods, up to the reader's limit.
    pub pods: Vec<PodFacts>,
    /// How many Pods the inventory held (more than `pods.len()` past the limit).
    pub count: usize,
}

impl Inventory {
    /// Appends the Pods of a further page, keeping facts for at most `keep_at_most` in all.
    pub fn extend(&mut self, page: Inventory, keep_at_most: usize) {
        let room = keep_at_most.saturating_sub(self.pods.len());
        self.pods.extend(page.pods.into_iter().take(room));
        self.count += page.count;
    }
}

/// Reads a whole inventory held in memory.
///
/// # Errors
/// As [`Reader::feed`] and [`Reader::finish`].
pub fn read(
    bytes: &[u8],
    rules: Rules<'_>,
    keep_at_most: usize,
) -> Result<Inventory, InventoryError> {
    let mut reader = Reader::new(rules, keep_at_most);
    reader.feed(bytes)?;
    reader.finish()
}

/// The facts of the `status` member under `parent`.
fn status_facts(members: &[Member<'_>], parent: Option<usize>) -> StatusFacts {
    match member(members, parent, "status") {
        Some((i, m)) => StatusFacts::from_members(Some(m.value), members, Some(i), m.canonical_len),
        None => StatusFacts::from_members(None, members, None, 0),
    }
}

/// Facts of a Pod read from its `metadata` and `status` JSON (as a live cluster returns them).
///
/// # Errors
/// [`BadField`] when either text is not JSON.
pub fn pod_facts(
    metadata: Raw<'_>,
    status: Option<Raw<'_>>,
    rules: Rules<'_>,
) -> Result<PodFacts, BadField> {
    Ok(PodFacts {
        meta: MetaFacts::read(metadata, rules),
        status: StatusFacts::read(status)?,
    })
}

#[cfg(test)]
mod tests;
