//! The observation ledger: when the collector first saw each eligible Pod.
//!
//! Its JSON form is the reference flow's, `{uid: {"first": seconds, "name": name}}`, so a ledger
//! moves between the flow and this tool unchanged. Numbers keep their Python type (an `int` first
//! observation stays an `int`), so a ledger written back is the ledger read.
//!
//! A ledger gc writes to a file or the store is led by one more entry, [`SCOPE_KEY`], naming the
//! cluster and namespace it belongs to; a ledger that names others is refused
//! ([`PreviousLedger::check_scope`]), so that one flow's ledger is never taken for another's
//! (the reference flow's store key, `pod-diagnostics-<cluster>-<namespace>`, is the same for
//! cluster `prod-x` and namespace `batch` as for cluster `prod` and namespace `x-batch`). A
//! ledger without it (the reference flow's) is accepted; the flow, which looks entries up by
//! uid, ignores it.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use thiserror::Error;

use crate::pyjson::type_name as kind;
use crate::pyjson::{self, Layout};

/// A number as Python holds it after `json.load`: `int`, `float`, or `bool` (an `int` too).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PyNum {
    /// A JSON integer.
    Int(i64),
    /// A JSON number with a fraction or exponent, or the current time.
    Float(f64),
    /// `true` or `false`, which Python compares as 1 and 0.
    Bool(bool),
}

impl PyNum {
    /// The value as seconds.
    #[allow(clippy::cast_precision_loss)]
    pub fn seconds(self) -> f64 {
        match self {
            Self::Int(i) => i as f64,
            Self::Float(f) => f,
            Self::Bool(b) => f64::from(u8::from(b)),
        }
    }

    /// Reads a JSON value that Python's `isinstance(v, (int, float))` accepts.
    pub fn from_json(v: &Value) -> Option<Self> {
        match v {
            Value::Bool(b) => Some(Self::Bool(*b)),
            Value::Number(n) if n.is_f64() => n.as_f64().map(Self::Float),
            #[allow(clippy::cast_precision_loss)]
            Value::Number(n) => n
                .as_i64()
                .map(Self::Int)
                .or_else(|| n.as_u64().map(|u| Self::Float(u as f64))),
            _ => None,
        }
    }

    /// Appends the value as Python's `json.dumps` writes it.
    pub fn write(self, out: &mut String) {
        match self {
            Self::Int(i) => out.push_str(&i.to_string()),
            Self::Float(f) => pyjson::write_float(out, f),
            Self::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        }
    }
}

impl fmt::Display for PyNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

impl<'de> Deserialize<'de> for PyNum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Self::from_json(&v)
            .ok_or_else(|| serde::de::Error::custom(format!("expected a number, found {v}")))
    }
}

impl Serialize for PyNum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Self::Int(i) => s.serialize_i64(i),
            Self::Float(f) => s.serialize_f64(f),
            Self::Bool(b) => s.serialize_bool(b),
        }
    }
}

/// One ledger entry: first observation and the Pod's name when it was seen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// Seconds since the epoch when first seen eligible.
    pub first: PyNum,
    /// `metadata.name` as given.
    pub name: Value,
}

/// The ledger a plan writes: the currently eligible Pods, in inventory order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    entries: Vec<(String, Observation)>,
    index: HashMap<String, usize>,
}

impl Ledger {
    /// Records `uid`; a repeated uid keeps its first position and takes the new value, as a
    /// Python `dict` does.
    pub fn insert(&mut self, uid: String, obs: Observation) {
        if let Some(&i) = self.index.get(&uid) {
            self.entries[i].1 = obs;
        } else {
            self.index.insert(uid.clone(), self.entries.len());
            self.entries.push((uid, obs));
        }
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Observation)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the ledger has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `uid`.
    pub fn get(&self, uid: &str) -> Option<&Observation> {
        self.index.get(uid).map(|&i| &self.entries[i].1)
    }

    /// The ledger as the flow stores it: `json.dumps(state)` with Python's default separators.
    pub fn to_json(&self) -> String {
        self.write_json(None)
    }

    /// [`Ledger::to_json`] led by the [`SCOPE_KEY`] entry naming `cluster_id` and `namespace`:
    /// the form gc writes to files and the store.
    pub fn to_scoped_json(&self, cluster_id: &str, namespace: &str) -> String {
        self.write_json(Some((cluster_id, namespace)))
    }

    fn write_json(&self, scope: Option<(&str, &str)>) -> String {
        let mut out = String::from("{");
        if let Some((cluster_id, namespace)) = scope {
            pyjson::write_str(&mut out, SCOPE_KEY);
            out.push_str(": {\"cluster\": ");
            pyjson::write_str(&mut out, cluster_id);
            out.push_str(", \"namespace\": ");
            pyjson::write_str(&mut out, namespace);
            out.push('}');
        }
        for (i, (uid, obs)) in self.entries.iter().enumerate() {
            if i > 0 || scope.is_some() {
                out.push_str(", ");
            }
            pyjson::write_str(&mut out, uid);
            out.push_str(": {\"first\": ");
            obs.first.write(&mut out);
            out.push_str(", \"name\": ");
            pyjson::write_value(&mut out, &obs.name, Layout::Default);
            out.push('}');
        }
        out.push('}');
        out
    }
}

impl Serialize for Ledger {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.entries.iter().map(|(k, v)| (k, v)))
    }
}

/// The entry of a ledger gc wrote that names the cluster and namespace it belongs to:
/// `{"cluster": ID, "namespace": NS}`. No Pod uid has a `:`.
pub const SCOPE_KEY: &str = "gc:scope";

/// A previous ledger as read: entries are checked only when the plan uses them, as the flow does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreviousLedger(pub HashMap<String, Value>);

/// A ledger that is not a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed observation ledger: {0}")]
pub struct LedgerError(pub String);

impl PreviousLedger {
    /// Reads the flow's ledger JSON. Only the top level is checked here.
    ///
    /// # Errors
    /// [`LedgerError`] when the text is not JSON or not an object.
    pub fn parse(bytes: &[u8]) -> Result<Self, LedgerError> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| LedgerError(e.to_string()))?;
        match v {
            Value::Object(map) => Ok(Self(map.into_iter().collect())),
            other => Err(LedgerError(format!(
                "expected an object, found {}",
                kind(&other)
            ))),
        }
    }
}

impl PreviousLedger {
    /// Refuses a ledger that names another cluster or namespace than `cluster_id` and
    /// `namespace` (or whose [`SCOPE_KEY`] entry is not the object gc writes); a ledger that
    /// names none is accepted.
    ///
    /// # Errors
    /// [`LedgerError`] naming both scopes.
    pub fn check_scope(&self, cluster_id: &str, namespace: &str) -> Result<(), LedgerError> {
        let Some(scope) = self.0.get(SCOPE_KEY) else {
            return Ok(());
        };
        let part = |name: &str| scope.get(name).and_then(Value::as_str);
        match (part("cluster"), part("namespace")) {
            (Some(c), Some(n)) if c == cluster_id && n == namespace => Ok(()),
            (Some(c), Some(n)) => Err(LedgerError(format!(
                "this is the ledger of cluster {c} namespace {n}, not of cluster {cluster_id} \
                 namespace {namespace}: refused"
            ))),
            _ => Err(LedgerError(format!(
                "its {SCOPE_KEY:?} entry is not {{\"cluster\": ID, \"namespace\": NS}}: {scope}"
            ))),
        }
    }
}

impl From<&Ledger> for PreviousLedger {
    fn from(l: &Ledger) -> Self {
        Self(
            l.iter()
                .map(|(uid, o)| {
                    let mut entry = serde_json::Map::new();
                    entry.insert(
                        "first".into(),
                        serde_json::to_value(o.first).unwrap_or(Value::Null),
                    );
                    entry.insert("name".into(), o.name.clone());
                    (uid.to_owned(), Value::Object(entry))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests;
