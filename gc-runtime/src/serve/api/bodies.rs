//! What a call may give, checked before anything is queued or read: the namespace of its path,
//! a session id, its JSON body (an object, each field once, never null) and its query string.
//! Each refusal is a `400` naming the field at fault.

use std::collections::BTreeSet;

use axum::body::Bytes;
use gc_core::sessions::SessionConfig;
use gc_core::sessions::requests::Requested;
use serde::Deserialize;

use super::answers::Problem;
use crate::requests::{Refusal, Requests};

/// The body of a plan or a collection: the sessions it is about (absent: all of the namespace).
#[derive(utoipa::ToSchema, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Asking {
    #[serde(default)]
    sessions: Option<Vec<String>>,
}

/// The body of a restore.
#[derive(utoipa::ToSchema, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Restoring {
    /// Every create a server-side dry run, no volume moved.
    #[serde(default)]
    pub(super) dry_run: bool,
    /// How long to wait for a claim created on its kept volume to be bound (at most 60; 0: the
    /// next run gives the volume back its policy).
    #[serde(default)]
    pub(super) bind_wait_seconds: u64,
}

/// A request's body as read: up to [`super::options::ApiOptions::body_limit`] bytes, else why
/// not.
pub(super) type Body = Result<Bytes, axum::Error>;

/// A request's body, read only once its caller is known and allowed (a caller without a token
/// holds no place while it sends one slowly): up to `limit` bytes.
pub(super) async fn read(body: axum::body::Body, limit: usize) -> Body {
    axum::body::to_bytes(body, limit).await
}

/// The body, once the caller is known to be allowed: a JSON object of the fields of `T` (an
/// empty body: `T`'s defaults), else a `400` saying it should be `shape`. A body that could not
/// be read whole (over [`super::options::ApiOptions::body_limit`], which [`read`] stops at, or
/// cut short) is bad input too.
fn json_body<T: serde::de::DeserializeOwned + Default>(
    body: Body,
    limit: usize,
    shape: &str,
) -> Result<T, Problem> {
    let body = body.map_err(|e| {
        let why = format!("the body could not be read whole (at most {limit} bytes): {e}");
        Problem::bad("body", why)
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    // An object only (serde would take a struct's fields from an array too), each field once and
    // never null: serde_json keeps the last of a key given twice, and reads a null list as an
    // absent one, which means every session.
    let Entries(entries) = serde_json::from_slice(&body)
        .map_err(|e| Problem::bad("body", format!("expected {shape}: {e}")))?;
    let mut object = serde_json::Map::new();
    for (key, value) in entries {
        if value.is_null() {
            let why = format!("null: give a value, or leave `{key}` out (expected {shape})");
            return Err(Problem::bad(&key, why));
        }
        if object.contains_key(&key) {
            return Err(Problem::bad(
                &key,
                format!("given twice (expected {shape})"),
            ));
        }
        object.insert(key, value);
    }
    serde_json::from_value(serde_json::Value::Object(object))
        .map_err(|e| Problem::bad("body", format!("expected {shape}: {e}")))
}

/// A JSON object's fields as given, in order, duplicates kept (to refuse them).
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// The sessions a body asks for, checked: a JSON object with at most `sessions`, each id a
/// label value (StreamSpace's session ids are), none twice.
pub(super) fn asking(body: Body, limit: usize) -> Result<Requested, Problem> {
    let shape = "{\"sessions\": [\"ID\", ...]} (or nothing: every session)";
    let asking: Asking = json_body(body, limit, shape)?;
    let Some(ids) = asking.sessions else {
        return Ok(Requested::All);
    };
    if ids.is_empty() {
        let why = "no session id: name at least one, or leave `sessions` out for all";
        return Err(Problem::bad("sessions", why));
    }
    let mut seen = BTreeSet::new();
    for (i, id) in ids.into_iter().enumerate() {
        session_id(&format!("sessions[{i}]"), &id)?;
        seen.insert(id);
    }
    Ok(Requested::Ids(seen))
}

/// `id`, the value of `field`, checked to be a session id: a label value, as StreamSpace's are.
pub(super) fn session_id(field: &str, id: &str) -> Result<(), Problem> {
    if id.is_empty() || !gc_core::selector::is_label_value(id) {
        let why = format!(
            "{id:?} is not a session id (a label value: at most 63 letters, digits, `-`, `_` or \
             `.`, beginning and ending with a letter or digit)"
        );
        return Err(Problem::bad(field, why));
    }
    Ok(())
}

/// The body of a restore, checked: at most `dryRun` and `bindWaitSeconds` (at most 60).
pub(super) fn restoring(body: Body, limit: usize) -> Result<Restoring, Problem> {
    let shape = "{\"dryRun\": BOOL, \"bindWaitSeconds\": N} (or nothing: a restore, no wait)";
    let restoring: Restoring = json_body(body, limit, shape)?;
    if restoring.bind_wait_seconds > 60 {
        let why = format!(
            "{} is over 60: a restore answers within a minute (0: the next run gives a kept \
             volume back its policy once its claim is bound)",
            restoring.bind_wait_seconds
        );
        return Err(Problem::bad("bindWaitSeconds", why));
    }
    Ok(restoring)
}

/// The `session` of a query string, checked: the only parameter, given once.
pub(super) fn session_query(query: Option<&str>) -> Result<String, Problem> {
    let mut session = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "session" if session.is_none() => session = Some(value.into_owned()),
            "session" => return Err(Problem::bad("session", "given more than once")),
            other => {
                let why = format!("unknown query parameter {other:?}: only `session` is taken");
                return Err(Problem::bad(other, why));
            }
        }
    }
    let Some(session) = session else {
        let why = "which session's archives: `?session=ID`";
        return Err(Problem::bad("session", why));
    };
    session_id("session", &session)?;
    Ok(session)
}

/// A namespace a request may name: one the collector serves, never a system namespace.
pub(super) fn namespace<'d, C, D, S, A>(
    desk: &'d Requests<C, D, S, A>,
    ns: &str,
) -> Result<&'d SessionConfig, Problem> {
    if gc_core::input::SYSTEM_NAMESPACES.contains(&ns) {
        let why = format!("{ns} is a system namespace: gc never collects there");
        return Err(Problem::bad("namespace", why));
    }
    desk.config(ns)
        .ok_or_else(|| Refusal::UnknownNamespace(ns.to_owned()).into())
}
