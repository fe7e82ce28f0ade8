//! Plan files name each member of an object once. The seal covers the parsed document, in which
//! the last of two members of one name wins, while a reader sees the first: a second reading
//! under a valid seal. [`check`] refuses such a file before anything else reads it, with the
//! path to the object that repeats a member.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Where a value lies in the document: a chain up to the root, on the stack.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Member(&'p Path<'p>, &'p str),
    Item(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Root => Ok(()),
            Self::Member(Self::Root, name) => f.write_str(name),
            Self::Member(parent, name) => write!(f, "{parent}.{name}"),
            Self::Item(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// One JSON value at `path`, read for its members alone.
struct Value<'p>(Path<'p>);

impl<'de> DeserializeSeed<'de> for Value<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Value<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut i = 0;
        while items
            .next_element_seed(Value(Path::Item(&self.0, i)))?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(name) = members.next_key::<String>()? {
            if seen.contains(&name) {
                let at = match self.0 {
                    Path::Root => String::new(),
                    path => format!("{path}: "),
                };
                return Err(de::Error::custom(format_args!(
                    "{at}member {name:?} given twice"
                )));
            }
            members.next_value_seed(Value(Path::Member(&self.0, &name)))?;
            seen.insert(name);
        }
        Ok(())
    }
}

/// Checks that `bytes` are one JSON document in which no object gives a member name twice
/// (names compared after their escapes are decoded).
///
/// # Errors
/// serde_json's error for text that is not JSON, or for the first object found repeating a
/// member: `PATH: member "NAME" given twice` (no `PATH: ` at the top level), with the line and
/// column.
pub(super) fn check(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    Value(Path::Root).deserialize(&mut deserializer)?;
    deserializer.end()
}

#[cfg(test)]
mod tests;
