//! The desk's restores: one session at a time per (namespace, id), done as the restore account
//! in a task of the desk's own (a caller that goes away does not cut a restore between two
//! creates, and a stop waits for it), each object an audit line; and the receipts a restore
//! reads.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gc_core::ports::{
    ClusterError, ObjectCreator, Receipt, RestoreAccount, SessionCluster, SessionDirectory,
    SessionReceipts, Sink, Store,
};

use super::{Refusal, Requests};
use crate::audit::RestoredLine;
use crate::restore::{RestoreRequest, Restored};

/// A restore a caller asks of the desk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreAsked {
    /// The namespace the session's objects were in.
    pub namespace: String,
    /// The session id.
    pub session: String,
    /// Every create a server-side dry run, no volume moved (a dry-run collector's restores
    /// are dry runs whatever this says).
    pub dry_run: bool,
    /// How long to wait for a claim created on its kept volume to be bound.
    pub bind_wait: Duration,
}

/// What a restore of one session did.
#[derive(Debug, Clone)]
pub struct SessionRestored {
    /// Whether every create was a server-side dry run.
    pub dry_run: bool,
    /// The account the objects were created as.
    pub restored_as: String,
    /// What came of each archived object (one line of no object: of the whole session).
    pub objects: Vec<Restored>,
}

/// Why a restore did not run, or ended without saying what came of each object. Nothing was
/// created, except for [`RestoreError::Lost`] (see the audit log).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The namespace is not one the desk serves.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Another restore of the session is in progress.
    #[error(
        "a restore of session {session} in {namespace} is in progress: its result is in the \
         audit log"
    )]
    InProgress {
        /// The namespace.
        namespace: String,
        /// The session id.
        session: String,
    },
    /// The restore account's credentials could not be had.
    #[error("cannot act as the restore account {account}: {error}; nothing was restored")]
    Account {
        /// The account's name.
        account: String,
        /// Why.
        error: ClusterError,
    },
    /// The request cannot be acted on (a usage error): nothing was read or written.
    #[error("{0:#}")]
    Request(crate::Error),
    /// The restore's task ended without an answer.
    #[error("the restore failed: {0}")]
    Lost(String),
}

/// Sessions, each a (namespace, id).
type Places = Arc<Mutex<BTreeSet<(String, String)>>>;

/// A session's place while a restore works on it: given back when dropped.
struct InFlight {
    places: Places,
    place: (String, String),
}

impl InFlight {
    /// The place of `session` in `ns`, `None` while another restore holds it.
    fn take(places: &Places, ns: &str, session: &str) -> Option<Self> {
        let place = (ns.to_owned(), session.to_owned());
        let mut taken = places.lock().unwrap_or_else(PoisonError::into_inner);
        taken.insert(place.clone()).then(|| Self {
            places: Arc::clone(places),
            place,
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut taken = self.places.lock().unwrap_or_else(PoisonError::into_inner);
        taken.remove(&self.place);
    }
}

impl<C, D, S, A> Requests<C, D, S, A>
where
    C: SessionCluster + ObjectCreator + Send + Sync + 'static,
    D: SessionDirectory + Send + Sync + 'static,
    S: Store + SessionReceipts + Send + Sync + 'static,
    A: Sink + Send + Sync + 'static,
{
    /// A restore of one session, as `restore sessions` does it, acting as `account` for
    /// `requested_by`: answered once done (each object created, found, or why not), each object
    /// an audit line. One restore of a session at a time: another would find every create
    /// racing it.
    ///
    /// # Errors
    /// [`RestoreError`]: the namespace, a restore of the session in progress, the account's
    /// credentials, the request, or a task that ended without an answer.
    pub async fn restore(
        self: &Arc<Self>,
        account: &dyn RestoreAccount<C>,
        asked: RestoreAsked,
        requested_by: &str,
    ) -> Result<SessionRestored, RestoreError> {
        let RestoreAsked {
            namespace,
            session,
            dry_run,
            bind_wait,
        } = asked;
        let cfg = self.config(&namespace);
        let cfg = cfg.ok_or_else(|| Refusal::UnknownNamespace(namespace.clone()))?;
        let request = RestoreRequest {
            cluster_id: cfg.cluster_id.clone(),
            namespace: namespace.clone(),
            kinds: cfg.kinds.clone(),
            sessions: vec![session.clone()],
            bind_wait,
        };
        let Some(place) = InFlight::take(&self.restoring, &namespace, &session) else {
            return Err(RestoreError::InProgress { namespace, session });
        };
        let cluster = account.act().await.map_err(|error| {
            tracing::warn!("restore of {session} refused (503): {error}");
            let account = account.name().to_owned();
            RestoreError::Account { account, error }
        })?;
        let dry_run = dry_run || self.collector.dry_run();
        // Its own task, holding the session's place until it ends: a caller that goes away
        // (or a call past its time) does not cut a restore between two creates, and what it
        // did is in the audit log either way.
        let (desk, user, restored_as) = (
            Arc::clone(self),
            requested_by.to_owned(),
            account.name().to_owned(),
        );
        let restored = self.spawn(async move {
            let _place = place;
            let objects = desk.collector.restore_as(&cluster, &request, dry_run);
            let objects = objects.await?;
            let time = gc_core::isotime::format_timestamp(crate::clock::now());
            let lines: Vec<_> = (objects.iter())
                .map(|object| RestoredLine {
                    time: &time,
                    namespace: &request.namespace,
                    decision: "restore",
                    object,
                    dry_run,
                    requested_by: &user,
                    restored_as: &restored_as,
                })
                .collect();
            desk.restored(&lines);
            let failed = objects.iter().filter(|o| o.failed()).count();
            tracing::info!(
                "restore of session {} in {} asked by {user}{}: {} object(s), {failed} failed",
                request.sessions.join(", "),
                request.namespace,
                if dry_run { " (dry run)" } else { "" },
                objects.len(),
            );
            Ok::<_, crate::Error>(objects)
        });
        let restored = restored
            .await
            .map_err(|e| RestoreError::Lost(e.to_string()))?;
        Ok(SessionRestored {
            dry_run,
            restored_as: account.name().to_owned(),
            objects: restored.map_err(RestoreError::Request)?,
        })
    }

    /// Every receipt of the objects archived with the session label `session` in `namespace`,
    /// newest first (what a restore of that session reads).
    ///
    /// # Errors
    /// [`Refusal::UnknownNamespace`], or the store could not be read.
    pub async fn receipts(
        &self,
        namespace: &str,
        session: &str,
    ) -> Result<Vec<Receipt>, crate::Error> {
        let Some(cfg) = self.config(namespace) else {
            let refusal = Refusal::UnknownNamespace(namespace.to_owned());
            return Err(crate::Error::msg(refusal.to_string()));
        };
        let receipts = self.collector.receipts(&cfg.cluster_id, namespace, session);
        receipts.await
    }
}
