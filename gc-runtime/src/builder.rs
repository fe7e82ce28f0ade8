//! The one door to both collectors: [`Builder`] takes the parts in one order — the cluster, the
//! application's session directory, gc's store, the archive sink, the clock — each a `gc-core`
//! port, then the stop, and builds either collector. A part not given stays `()`, and each
//! operation of a collector asks only for the parts it uses, so a collector built for less (a
//! plan: the cluster alone, or with the directory) cannot do more.
//!
//! ```ignore
//! let pods = Builder::new(settings).cluster(cluster).store(store).sink(sink).pods()?;
//! let sessions = Builder::new(settings)
//!     .cluster(cluster)
//!     .directory(table)
//!     .store(store)
//!     .sink(sink)
//!     .sessions()?;
//! ```

use std::sync::Arc;

use gc_core::ports::{OpenStore, PodCluster, SessionCluster};

use crate::clock::SystemClock;
use crate::pods::PodCollector;
use crate::sessions::SessionCollector;
use crate::{Cancel, Settings, SettingsError};

/// A collector's parts, given in one order, and its settings.
pub struct Builder<C = (), D = (), S = (), A = (), K = SystemClock> {
    cluster: C,
    directory: D,
    store: S,
    sink: A,
    clock: K,
    settings: Settings,
}

impl Builder {
    /// No part yet; acting as `settings` say.
    #[must_use]
    pub fn new(settings: Settings) -> Self {
        Self {
            cluster: (),
            directory: (),
            store: (),
            sink: (),
            clock: SystemClock,
            settings,
        }
    }
}

impl<C, D, S, A, K> Builder<C, D, S, A, K> {
    /// The cluster ([`PodCluster`], [`SessionCluster`]).
    pub fn cluster<C2>(self, cluster: C2) -> Builder<C2, D, S, A, K> {
        let Self {
            directory,
            store,
            sink,
            clock,
            settings,
            ..
        } = self;
        Builder {
            cluster,
            directory,
            store,
            sink,
            clock,
            settings,
        }
    }

    /// The application's session directory (the session collector's, read-only).
    pub fn directory<D2>(self, directory: D2) -> Builder<C, D2, S, A, K> {
        let Self {
            cluster,
            store,
            sink,
            clock,
            settings,
            ..
        } = self;
        Builder {
            cluster,
            directory,
            store,
            sink,
            clock,
            settings,
        }
    }

    /// gc's store of receipts and ledgers: opened for each namespace's run
    /// ([`OpenStore`], the failed-Pod collector), or open ([`gc_core::ports::Store`], the
    /// session collector).
    pub fn store<S2>(self, store: S2) -> Builder<C, D, S2, A, K> {
        let Self {
            cluster,
            directory,
            sink,
            clock,
            settings,
            ..
        } = self;
        Builder {
            cluster,
            directory,
            store,
            sink,
            clock,
            settings,
        }
    }

    /// The archive sink ([`gc_core::ports::Sink`]).
    pub fn sink<A2>(self, sink: A2) -> Builder<C, D, S, A2, K> {
        let Self {
            cluster,
            directory,
            store,
            clock,
            settings,
            ..
        } = self;
        Builder {
            cluster,
            directory,
            store,
            sink,
            clock,
            settings,
        }
    }

    /// The clock ([`gc_core::ports::Clock`]); default: the system's.
    pub fn clock<K2>(self, clock: K2) -> Builder<C, D, S, A, K2> {
        let Self {
            cluster,
            directory,
            store,
            sink,
            settings,
            ..
        } = self;
        Builder {
            cluster,
            directory,
            store,
            sink,
            clock,
            settings,
        }
    }

    /// The embedder's stop, given once: every run, every wait for a Lease and every restore's
    /// wait for a volume honour it ([`Settings::cancel`]).
    #[must_use]
    pub fn stop(mut self, stop: impl Cancel + 'static) -> Self {
        self.settings.cancel = Arc::new(stop);
        self
    }
}

impl<C: PodCluster, S: OpenStore, A: Send + Sync, K: Send + Sync> Builder<C, (), S, A, K> {
    /// The failed-Pod collector of these parts.
    ///
    /// # Errors
    /// [`SettingsError`] when the settings cannot be acted on ([`Settings::check`]).
    pub fn pods(self) -> Result<PodCollector<C, S, A, K>, SettingsError> {
        let parts = (self.cluster, self.store, self.sink, self.clock);
        PodCollector::new(parts, self.settings)
    }
}

impl<C: SessionCluster, D, S, A> Builder<C, D, S, A, SystemClock> {
    /// The session collector of these parts.
    ///
    /// # Errors
    /// [`SettingsError`] when the settings cannot be acted on ([`Settings::check`]).
    pub fn sessions(self) -> Result<SessionCollector<C, D, S, A>, SettingsError> {
        let parts = (self.cluster, self.directory, self.store, self.sink);
        SessionCollector::new(parts, self.settings)
    }
}
