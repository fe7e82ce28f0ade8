//! Pod inventories as files: `kubectl get pods -o json` output and the reference flow's shape.
//!
//! Both are read without building a JSON tree: each Pod's `metadata` and `status` stay borrowed
//! text ([`PodRecord`]) that the rules decode field by field. The flow's shape is
//! `{"size": N, "metadataItems": [meta...], "statusItems": [{"status": ...}...]}`, paired by
//! position; a `PodList` is `{"items": [{"metadata": ..., "status": ...}...]}`.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use thiserror::Error;

use crate::pod::PodRecord;
use crate::raw::{self, keep, Raw};

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

/// A list, or any other JSON value (skimmed and dropped).
enum MaybeList<T> {
    List(Vec<T>),
    Other,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MaybeList<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MaybeListVisitor(std::marker::PhantomData))
    }
}

struct MaybeListVisitor<T>(std::marker::PhantomData<T>);

macro_rules! other {
    ($($name:ident: $t:ty),*) => {$(
        fn $name<E: serde::de::Error>(self, _: $t) -> Result<Self::Value, E> { Ok(Self::Value::other()) }
    )*};
}

trait Other {
    fn other() -> Self;
}

impl<T> Other for MaybeList<T> {
    fn other() -> Self {
        Self::Other
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for MaybeListVisitor<T> {
    type Value = MaybeList<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(MaybeList::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(MaybeList::Other)
    }
    other!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(MaybeList::Other)
    }
}

/// One element of `statusItems`: its `status` when it is an object; `Err` where the flow's
/// `s.get('status')` would raise.
struct StatusItem<'a>(Result<Option<Raw<'a>>, ()>);

impl<'de: 'a, 'a> Deserialize<'de> for StatusItem<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StatusItemVisitor(std::marker::PhantomData))
    }
}

struct StatusItemVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl Other for StatusItem<'_> {
    fn other() -> Self {
        StatusItem(Err(()))
    }
}

impl<'de: 'a, 'a> Visitor<'de> for StatusItemVisitor<'a> {
    type Value = StatusItem<'a>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        raw::FindKey("status").visit_map(map).map(|s| StatusItem(Ok(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(StatusItem(Err(())))
    }
    other!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(StatusItem(Err(())))
    }
}

#[derive(Deserialize)]
struct PodItem<'a> {
    #[serde(borrow)]
    metadata: Raw<'a>,
    #[serde(borrow, default, deserialize_with = "keep")]
    status: Option<Raw<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "keep")]
    size: Option<Raw<'a>>,
    #[serde(borrow = "'a", default)]
    metadata_items: Option<MaybeList<Raw<'a>>>,
    #[serde(borrow = "'a", default)]
    status_items: Option<MaybeList<StatusItem<'a>>>,
    #[serde(borrow = "'a", default)]
    items: Option<MaybeList<PodItem<'a>>>,
}

/// Reads an inventory in either shape, borrowing every Pod from `bytes`.
///
/// # Errors
/// [`InventoryError::Malformed`] for text that is not JSON or not an object, a `PodList` item
/// without `metadata`, or a `statusItems` element that is not an object;
/// [`InventoryError::Incomplete`] for the flow's shape with missing or unequal lists.
pub fn parse(bytes: &[u8]) -> Result<Vec<PodRecord<'_>>, InventoryError> {
    let env: Envelope<'_> =
        serde_json::from_slice(bytes).map_err(|e| InventoryError::Malformed(e.to_string()))?;
    // `payload.get('size') == 0` (also `0.0` and `false`, which Python counts as equal to 0).
    if env.size.is_some_and(|s| s.get().parse::<f64>().is_ok_and(|n| n == 0.0) || s.get() == "false") {
        return Ok(Vec::new());
    }
    if env.metadata_items.is_none() && env.status_items.is_none() {
        if let Some(items) = env.items {
            let MaybeList::List(items) = items else {
                return Err(InventoryError::Malformed("items is not a list".into()));
            };
            return Ok(items.into_iter().map(|i| PodRecord { metadata: i.metadata, status: i.status }).collect());
        }
    }
    let (Some(MaybeList::List(metas)), Some(MaybeList::List(statuses))) = (env.metadata_items, env.status_items)
    else {
        return Err(InventoryError::Incomplete("metadataItems and statusItems must both be lists"));
    };
    if metas.len() != statuses.len() {
        return Err(InventoryError::Incomplete("metadataItems and statusItems differ in length"));
    }
    metas
        .into_iter()
        .zip(statuses)
        .enumerate()
        .map(|(i, (metadata, s))| match s.0 {
            Ok(status) => Ok(PodRecord { metadata, status }),
            Err(()) => Err(InventoryError::Malformed(format!("statusItems[{i}] is not an object"))),
        })
        .collect()
}
