//! Pod inventories as streams: `kubectl get pods -o json` output and the reference flow's shape.
//!
//! [`Reader`] takes the text in chunks of any size ([`Reader::feed`]) and turns each Pod into
//! [`PodFacts`] as soon as its last byte arrives; the JSON itself is dropped, so memory holds one
//! Pod's text at a time plus the facts. Both shapes are accepted: the flow's
//! `{"size": N, "metadataItems": [meta...], "statusItems": [{"status": ...}...]}`, paired by
//! position (in either key order), and a list `{"items": [{"metadata": ..., "status": ...}...]}`.
//! Top-level values other than those are skipped without being kept.
//!
//! A long run of text inside one list is skimmed by two threads: a helper thread (started once
//! per reader, at the first long run) skims from a guessed element boundary in the middle (the
//! text that began the list's second element, found again) and hands back where each element
//! and its members are; its work is kept only when the reader, reading on in order, arrives
//! exactly there in the same state, and the reader then reads the facts of those elements in
//! order itself. Otherwise it is dropped and the reader reads on alone, so results, errors and
//! their offsets are those of one reader.

use std::sync::{Arc, mpsc};

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

/// What an inventory that does not start as JSON does (after whitespace): a YAML list, most
/// likely.
const NOT_JSON: &str = "expected a JSON object, found text that is not JSON (YAML?): the \
                            inventory must be JSON: kubectl get pods -o json";

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

/// Below this much text at once, the reader works alone.
const PARALLEL_FROM: usize = 128 * 1024;

/// How many times a second thread's work was taken (tests check the path is taken).
#[cfg(test)]
static TAKEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

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
    /// The list whose element boundaries [`Reader::boundary`] matches, once learnt.
    boundary_of: Option<Key>,
    /// The text from the end of that list's first element to its second element's first key:
    /// where a later element most likely starts.
    boundary: Vec<u8>,
    /// Where the element starts in [`Reader::boundary`].
    boundary_start: usize,
    /// From how much text at once a second thread helps.
    parallel_from: usize,
    /// The helper thread, once started.
    helper: Option<Helper>,
    /// In the helper thread: elements are only skimmed and recorded here, not read.
    skimmed: Option<Skimmed>,
}

/// Elements skimmed by the helper thread, as offsets into the text.
#[derive(Debug, Default)]
struct Skimmed {
    /// Where the text is, and its length: members are kept as offsets into it.
    base: usize,
    text_len: usize,
    /// Each element: its text, its canonical length, and its members in `members`.
    elements: Vec<(std::ops::Range<usize>, usize, std::ops::Range<usize>)>,
    members: Vec<OwnedMember>,
}

/// A [`Member`] as offsets into the text.
#[derive(Debug, Clone)]
struct OwnedMember {
    parent: Option<usize>,
    /// `None` for an array element's key (`""`, not in the text).
    key: Option<std::ops::Range<usize>>,
    value: std::ops::Range<usize>,
    canonical_len: usize,
    escaped: bool,
}

impl Skimmed {
    /// Where `part` lies in the text; `None` when it is not a slice of it.
    fn range(&self, part: &str) -> Option<std::ops::Range<usize>> {
        let start = (part.as_ptr() as usize).checked_sub(self.base)?;
        (start + part.len() <= self.text_len).then_some(start..start + part.len())
    }
}

/// What the helper thread reads: the elements of the list `key` in `text[start..len]`.
struct Job {
    text: Arc<Vec<u8>>,
    len: usize,
    start: usize,
    key: Key,
}

/// What the helper skimmed, its state at the end, and how it ended.
struct Done {
    at: At,
    skimmed: Skimmed,
    end: Result<Step, InventoryError>,
}

/// A thread that reads the second half of long runs of a list's elements.
#[derive(Debug)]
struct Helper {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Done>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Helper {
    /// The helper thread; `None` when no thread can be started (the reader then works alone).
    fn start(rules: Rules<'_>) -> Option<Self> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (outbox, done) = mpsc::channel();
        let owned = (
            rules.namespace.to_owned(),
            rules.collect_label.to_owned(),
            rules.pin.to_owned(),
        );
        let thread = std::thread::Builder::new()
            .name("inventory-reader".into())
            .spawn(move || {
                let rules = Rules {
                    namespace: &owned.0,
                    collect_label: &owned.1,
                    pin: &owned.2,
                    // The helper only skims: the facts, labels included, are the reader's.
                    protect: None,
                    exclude: None,
                };
                for job in inbox {
                    let done = Self::read(&job, rules);
                    drop(job);
                    if outbox.send(done).is_err() {
                        return;
                    }
                }
            });
        Some(Self {
            jobs: Some(jobs),
            done,
            thread: Some(thread.ok()?),
        })
    }

    fn read(job: &Job, rules: Rules<'_>) -> Done {
        let mut part = Reader::new(rules, 0);
        part.parallel_from = usize::MAX;
        part.at = At::NextElement(job.key);
        part.skimmed = Some(Skimmed::default());
        // The reader checked this text is UTF-8.
        let end = match std::str::from_utf8(&job.text[..job.len]) {
            Err(e) => Err(malformed(e.to_string())),
            Ok(text) => {
                if let Some(skimmed) = &mut part.skimmed {
                    skimmed.base = text.as_ptr() as usize;
                    skimmed.text_len = text.len();
                }
                let mut members = Vec::new();
                let mut pos = job.start;
                loop {
                    if part.at == At::AfterValue {
                        break Ok(Step::Next(pos));
                    }
                    match part.step(text, pos, &mut members) {
                        Ok(Step::Next(next)) => pos = next,
                        other => break other,
                    }
                }
            }
        };
        Done {
            at: part.at,
            skimmed: part.skimmed.take().unwrap_or_default(),
            end,
        }
    }

    /// The helper's answer; its panic, if it panicked.
    fn wait(&mut self) -> Done {
        match self.done.recv() {
            Ok(done) => done,
            Err(_) => {
                self.jobs = None;
                match self.thread.take().map(std::thread::JoinHandle::join) {
                    Some(Err(panic)) => std::panic::resume_unwind(panic),
                    _ => panic!("the inventory reader's helper thread stopped"),
                }
            }
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
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
            boundary_of: None,
            boundary: Vec::new(),
            boundary_start: 0,
            parallel_from: PARALLEL_FROM,
            helper: None,
            skimmed: None,
        }
    }

    /// The same reader with a second thread from `bytes` of text at once (tests reach the
    /// two-thread path with small texts).
    #[cfg(test)]
    fn parallel_from(mut self, bytes: usize) -> Self {
        self.parallel_from = bytes;
        self
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
        let buf = Arc::new(std::mem::take(&mut self.buf));
        let kept = self.consume_from(&buf)?;
        self.buf = Arc::try_unwrap(buf).unwrap_or_else(|shared| shared.to_vec());
        self.buf.drain(..kept);
        self.drained += kept;
        self.retry_at = self.buf.len() * 2;
        Ok(())
    }

    /// Reads every complete value in `buf`; how many bytes were read.
    fn consume_from(&mut self, buf: &Arc<Vec<u8>>) -> Result<usize, InventoryError> {
        // A chunk may end inside a multi-byte character: read up to it.
        let text = match std::str::from_utf8(buf) {
            Ok(text) => text,
            Err(e) if e.error_len().is_none() => std::str::from_utf8(&buf[..e.valid_up_to()])
                .map_err(|e| utf8_error(&e, self.drained))?,
            Err(e) => return Err(utf8_error(&e, self.drained)),
        };
        let mut members = Vec::new();
        let mut pos = 0;
        // No second thread is tried before this position.
        let mut try_from = 0;
        let kept = loop {
            if pos >= try_from && text.len() - pos >= self.parallel_from {
                if let Some((key, at)) = self.split(text, pos) {
                    match self.in_two(buf, text, pos, key, at, &mut members)? {
                        Step::Next(next) => {
                            pos = next;
                            try_from = pos;
                            continue;
                        }
                        Step::NeedMore(from) => break from,
                    }
                }
                try_from = usize::MAX;
            }
            match self.step(text, pos, &mut members)? {
                Step::Next(next) => pos = next,
                Step::NeedMore(from) => break from,
            }
        };
        Ok(kept)
    }

    /// Where a second thread may start: the list being read and a likely element start past the
    /// middle of the text from `pos`.
    fn split(&self, text: &str, pos: usize) -> Option<(Key, usize)> {
        let key = match self.at {
            At::Element(k) | At::NextElement(k) | At::AfterElement(k) => k,
            _ => return None,
        };
        if self.boundary_of != Some(key) {
            return None;
        }
        let b = text.as_bytes();
        let first = *self.boundary.first()?;
        let mut from = pos + (b.len() - pos) / 2;
        while let Some(i) = b[from..].iter().position(|&c| c == first) {
            let at = from + i;
            if b[at..].starts_with(&self.boundary) {
                return Some((key, at + self.boundary_start));
            }
            from = at + 1;
        }
        None
    }

    /// Reads from `pos` in order while the helper thread reads the elements of the list `key`
    /// from `start` (in state [`At::NextElement`]); the helper's work is taken when this reader
    /// arrives at `start` in that state, and dropped otherwise.
    fn in_two<'t>(
        &mut self,
        buf: &Arc<Vec<u8>>,
        text: &'t str,
        mut pos: usize,
        key: Key,
        start: usize,
        members: &mut Vec<Member<'t>>,
    ) -> Result<Step, InventoryError> {
        let job = Job {
            text: Arc::clone(buf),
            len: text.len(),
            start,
            key,
        };
        if self.helper.is_none() {
            self.helper = Helper::start(self.rules);
        }
        let Some(helper) = self.helper.as_mut() else {
            self.parallel_from = usize::MAX;
            return Ok(Step::Next(pos));
        };
        if helper
            .jobs
            .as_ref()
            .is_none_or(|jobs| jobs.send(job).is_err())
        {
            helper.wait();
        }
        let b = text.as_bytes();
        let arrived = loop {
            if self.at == At::NextElement(key)
                && pos <= start
                && b[pos..start].iter().all(|&c| is_ws(c))
            {
                break true;
            }
            if pos > start {
                break false;
            }
            match self.step(text, pos, members) {
                Ok(Step::Next(next)) => pos = next,
                other => {
                    self.helper.as_mut().map(Helper::wait);
                    return other;
                }
            }
        };
        let Some(part) = self.helper.as_mut().map(Helper::wait) else {
            return Ok(Step::Next(pos));
        };
        if !arrived {
            return Ok(Step::Next(pos));
        }
        // The facts of the skimmed elements, read here in order (errors as one reader meets them).
        let Skimmed {
            elements,
            members: owned,
            ..
        } = part.skimmed;
        for (element, len, range) in elements {
            members.clear();
            members.extend(owned[range].iter().map(|m| Member {
                parent: m.parent,
                key: m.key.clone().map_or("\"\"", |k| &text[k]),
                value: &text[m.value.clone()],
                canonical_len: m.canonical_len,
                escaped: m.escaped,
            }));
            self.at = At::NextElement(key);
            self.value(&text[element], members, len)?;
        }
        self.at = part.at;
        #[cfg(test)]
        TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        part.end
    }

    /// Learns how elements of the list `key` start, from the second element, at `i`.
    fn learn_boundary(&mut self, b: &[u8], i: usize, key: Key) {
        let back = |mut j: usize| {
            while j > 0 && is_ws(b[j - 1]) {
                j -= 1;
            }
            j
        };
        let j = back(i);
        if j == 0 || b[j - 1] != b',' {
            return;
        }
        let j = back(j - 1);
        if j == 0 || b[j - 1] != b'}' {
            return;
        }
        let mut k = i + 1;
        while k < b.len() && is_ws(b[k]) {
            k += 1;
        }
        if b.get(k) != Some(&b'"') {
            return;
        }
        let Some(close) = b[k + 1..].iter().position(|&c| c == b'"' || c == b'\\') else {
            return;
        };
        if b[k + 1 + close] != b'"' {
            return;
        }
        self.boundary = b[j - 1..=k + 1 + close].to_vec();
        self.boundary_start = i - (j - 1);
        self.boundary_of = Some(key);
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
            (At::Start, b'[') => return Err(malformed("expected a JSON object")),
            // `kubectl get pods -o yaml`, most likely.
            (At::Start, _) => return Err(malformed(NOT_JSON)),
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
                if let At::NextElement(k) = self.at
                    && self.boundary_of != Some(k)
                    && b[i] == b'{'
                {
                    self.learn_boundary(b, i, k);
                }
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
        if self.boundary_of == Some(key) {
            self.boundary_of = None;
        }
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
            At::Element(key) | At::NextElement(key) if self.skimmed.is_some() => {
                if let Some(skimmed) = &mut self.skimmed {
                    let from = skimmed.members.len();
                    for m in members {
                        let member = OwnedMember {
                            parent: m.parent,
                            key: skimmed.range(m.key),
                            value: skimmed.range(m.value).unwrap_or_default(),
                            canonical_len: m.canonical_len,
                            escaped: m.escaped,
                        };
                        skimmed.members.push(member);
                    }
                    let to = skimmed.members.len();
                    let element = skimmed.range(text).unwrap_or_default();
                    skimmed.elements.push((element, len, from..to));
                }
                At::AfterElement(key)
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
        // Paired into a vector of the final size at once (a collect into a `Result` cannot know
        // it, and would grow and copy).
        let mut pods = Vec::with_capacity(self.metas.items.len().min(self.statuses.items.len()));
        for (i, (meta, status)) in self
            .metas
            .items
            .into_iter()
            .zip(self.statuses.items)
            .enumerate()
        {
            match status {
                Ok(status) => pods.push(PodFacts { meta, status }),
                Err(()) => return Err(malformed(format!("statusItems[{i}] is not an object"))),
            }
        }
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
