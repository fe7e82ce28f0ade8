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
