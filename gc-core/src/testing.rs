//! What the unit tests of the engines share.

use std::task::{Context, Poll, Waker};

/// Runs a future whose ports never wait (every fake answers at once).
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
}

/// The session settings the engine tests share: StreamSpace's defaults with a guard floor of 1
/// and a ratio of one half, so that small fixtures reach the guard, on a cluster whose `Session`
/// definition is installed under one group (the fakes tell kinds apart by name only).
pub(crate) fn session_config() -> crate::sessions::SessionConfig {
    let mut kinds = crate::sessions::Kind::streamspace();
    kinds.retain(|k| k.group != "stream.streamspace.io");
    crate::sessions::SessionInputs {
        guard_floor: 1,
        guard_ratio: 0.5,
        kinds,
        ..Default::default()
    }
    .validate()
    .unwrap()
}
