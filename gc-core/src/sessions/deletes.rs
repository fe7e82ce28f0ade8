//! What a session collector's delete came to ([`DeleteResult`]), and why one is not sent.

use serde::Serialize;

use crate::lease::Held;

/// What a fenced delete did. In audit lines it is the text [`std::fmt::Display`] gives:
/// `deleted`, `would delete`, `changed: skipped, re-checked next run`, `failed: ...`,
/// `not started: ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteResult {
    /// The object was deleted.
    Deleted,
    /// Dry run: the server accepted the delete in dry-run mode.
    WouldDelete,
    /// A fence held (the object changed or is gone since it was listed): re-checked next run.
    Changed,
    /// The delete failed, or was not sent (lock lost, unknown kind): why.
    Failed(String),
    /// The delete was not sent because the caller asked the run to stop ([`Held::stopping`]):
    /// why. Not a failure: the next run judges the object again.
    NotStarted(String),
}

impl DeleteResult {
    /// Whether the run counts this as a failure.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed(_))
    }
}

impl std::fmt::Display for DeleteResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Deleted => f.write_str("deleted"),
            Self::WouldDelete => f.write_str("would delete"),
            Self::Changed => f.write_str("changed: skipped, re-checked next run"),
            Self::Failed(why) => write!(f, "failed: {why}"),
            Self::NotStarted(why) => write!(f, "not started: {why}"),
        }
    }
}

/// The result of a delete not sent because of `held`: a failure when the run lock was lost
/// (another run may be working; checked first), not started when the run was asked to stop (no
/// failure: the next run judges it again). Read before each write.
pub(crate) fn unsent(held: Held<'_>) -> Option<DeleteResult> {
    if held.lost() {
        return Some(DeleteResult::Failed(
            "not deleted: the run lock was lost".into(),
        ));
    }
    held.stopping().then(|| {
        DeleteResult::NotStarted("the process is stopping; the next run judges it again".into())
    })
}

impl Serialize for DeleteResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The schema of what [`DeleteResult`]'s `Serialize` writes: its text.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for DeleteResult {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let text = "`deleted`, `would delete`, `changed: skipped, re-checked next run`, \
                    `failed: ...` or `not started: ...`";
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(text))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for DeleteResult {}
