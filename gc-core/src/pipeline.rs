//! The bounded pipeline both collectors act through: up to `concurrency` objects in flight, each
//! walking its own protocol step by step, results in the order of the plan.
//!
//! Nothing here decides: the caps and the mass-deletion guard are decided by the plan, before
//! any object starts; the run lock ([`crate::lease::Held`]) is read by each object before each
//! of its writes, so a lost lock halts every object in flight before its next write, and a stop
//! starts nothing new (an object already started finishes as the protocol says).

use std::future::Future;

use futures_util::stream::{self, StreamExt};

/// Objects in flight at once when not told otherwise: on a two-core machine against a real API
/// server, 8 in flight brought a run within reach of bare fenced deletes at the same
/// concurrency, and 16 gained nothing more (`benches/README.md`, "Deletes at API speed").
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The most objects in flight a run accepts: more only queue at the API server's own
/// per-client limits (its priority and fairness) and hold more archives in memory at once.
pub const MAX_CONCURRENCY: usize = 64;

/// Runs `work` on each of `items`, at most `concurrency` at once (at least 1), and answers
/// their results in the order of `items`. An item starts only when one in flight ends, so a
/// condition `work` reads at its start (a stop) is read when it truly starts.
pub async fn in_order<T, R, F, Fut>(
    items: impl IntoIterator<Item = T>,
    concurrency: usize,
    work: F,
) -> Vec<R>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = R>,
{
    stream::iter(items)
        .map(work)
        .buffered(concurrency.max(1))
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::testing::block_on;

    /// A future that is pending once (so that others get to start) before it ends.
    async fn yield_once() {
        let mut yielded = false;
        std::future::poll_fn(|cx| {
            if yielded {
                std::task::Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await;
    }

    #[test]
    fn at_most_concurrency_in_flight_results_in_order() {
        for (concurrency, expected_peak) in [(0, 1), (1, 1), (3, 3), (8, 8), (64, 10)] {
            let (now, peak) = (Cell::new(0), Cell::new(0));
            let results = block_on(in_order(0..10, concurrency, |i| {
                let (now, peak) = (&now, &peak);
                async move {
                    now.set(now.get() + 1);
                    peak.set(peak.get().max(now.get()));
                    // Later items end sooner: the order of results is still the items'.
                    for _ in 0..(10 - i) {
                        yield_once().await;
                    }
                    now.set(now.get() - 1);
                    i * 2
                }
            }));
            assert_eq!(results, (0..10).map(|i| i * 2).collect::<Vec<_>>());
            assert_eq!(peak.get(), expected_peak, "concurrency {concurrency}");
        }
    }
}
