//! What a restore did: a line per archived object (or one of no object, of its whole
//! session), each with its result.

use serde::Serialize;

/// What came of one archived object.
#[cfg_attr(feature = "admin", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    /// The session id.
    pub session: String,
    /// The object's `apiVersion` (empty when the session has no archive at all).
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The uid of the object archived.
    pub archived_uid: String,
    /// The uid of the object created (or that would be; `null` otherwise).
    pub uid: Option<String>,
    /// `created`, `would create`, `exists` (left as it is), or `failed: ...`.
    #[cfg_attr(feature = "admin", schema(value_type = String))]
    pub result: Restoration,
    /// What else was done or is owed (the volume bound, its policy given back, ...).
    pub note: Option<String>,
}

impl Restored {
    /// Whether the restore of this object (or of its whole session) failed.
    #[must_use]
    pub fn failed(&self) -> bool {
        self.result.failed()
    }
}

/// What came of one archived object, or of a whole session when the line names no object
/// ([`Restoration::NoArchive`], [`Restoration::Unlisted`]). Written as its words (`created`,
/// `would create`, `exists`, `failed: ...`): the audit lines, the API's answers and the CLI's
/// output all carry them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restoration {
    /// Created again (`created`).
    Created,
    /// A dry run's create, which the API server accepted (`would create`).
    WouldCreate,
    /// It exists (`exists`): left as it is.
    Exists,
    /// Another claim has the archived claim's name, and the volume gc kept for it is not on
    /// it (`failed: conflict: REASON`): nothing more of the session is created.
    Conflict {
        /// Which claim, which volume, and what to do.
        reason: String,
    },
    /// Not restored (`failed: REASON`).
    Failed {
        /// Why.
        reason: String,
    },
    /// The session has no archive at all (`failed: REASON`): nothing to restore.
    NoArchive {
        /// Where none was found.
        reason: String,
    },
    /// The session's receipts could not be listed (`failed: REASON`): nothing was restored.
    Unlisted {
        /// Why.
        reason: String,
    },
}

impl Restoration {
    pub(super) fn failed_because(reason: impl Into<String>) -> Self {
        Self::Failed {
            reason: reason.into(),
        }
    }

    /// Whether the object (or the session) was not restored.
    #[must_use]
    pub fn failed(&self) -> bool {
        !matches!(self, Self::Created | Self::WouldCreate | Self::Exists)
    }

    /// Whether the object was created, or a dry run says it would be.
    #[must_use]
    pub fn created(&self) -> bool {
        matches!(self, Self::Created | Self::WouldCreate)
    }

    /// The same result, its reason (if any) rewritten by `reword` (options shown as flags, say).
    #[must_use]
    pub fn reworded(self, reword: impl FnOnce(&str) -> String) -> Self {
        match self {
            Self::Conflict { reason } => Self::Conflict {
                reason: reword(&reason),
            },
            Self::Failed { reason } => Self::Failed {
                reason: reword(&reason),
            },
            Self::NoArchive { reason } => Self::NoArchive {
                reason: reword(&reason),
            },
            Self::Unlisted { reason } => Self::Unlisted {
                reason: reword(&reason),
            },
            done @ (Self::Created | Self::WouldCreate | Self::Exists) => done,
        }
    }
}

impl std::fmt::Display for Restoration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Created => f.write_str("created"),
            Self::WouldCreate => f.write_str("would create"),
            Self::Exists => f.write_str("exists"),
            Self::Conflict { reason } => write!(f, "failed: conflict: {reason}"),
            Self::Failed { reason } | Self::NoArchive { reason } | Self::Unlisted { reason } => {
                write!(f, "failed: {reason}")
            }
        }
    }
}

impl Serialize for Restoration {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each result is written as its words (the audit lines, the API's answers and the CLI's
    /// output carry them), a conflict's and a session's too.
    #[test]
    fn results_are_written_as_their_words() {
        let reason = || "r `bind_wait`".to_owned();
        let cases = [
            (Restoration::Created, "created"),
            (Restoration::WouldCreate, "would create"),
            (Restoration::Exists, "exists"),
            (
                Restoration::Conflict { reason: reason() },
                "failed: conflict: r `bind_wait`",
            ),
            (
                Restoration::Failed { reason: reason() },
                "failed: r `bind_wait`",
            ),
            (
                Restoration::NoArchive { reason: reason() },
                "failed: r `bind_wait`",
            ),
            (
                Restoration::Unlisted { reason: reason() },
                "failed: r `bind_wait`",
            ),
        ];
        for (result, words) in cases {
            assert_eq!(result.to_string(), words);
            assert_eq!(serde_json::to_value(&result).unwrap(), words);
            assert_eq!(result.failed(), words.starts_with("failed"), "{words}");
            let reworded = result
                .clone()
                .reworded(|r| r.replace("`bind_wait`", "--bind-wait"));
            assert_eq!(
                reworded.to_string(),
                words.replace("`bind_wait`", "--bind-wait")
            );
            assert_eq!(
                std::mem::discriminant(&reworded),
                std::mem::discriminant(&result)
            );
        }
    }
}
