//! The bounded pipeline both collectors act through: up to `concurrency` objects in flight, each
//! walking its own protocol step by step, results in the order of the plan.
//!
//! Nothing here decides: the caps and the mass-deletion guard are decided by the plan, before
//! any object starts; the run lock ([`crate::lease::Held`]) is read by each object before each
//! of its writes, so a lost lock halts every object in flight before its next write, and a stop
//! starts nothing new (an object already started finishes as the protocol says).

use std::future::Future;

use futures_util::stream::{FuturesUnordered, StreamExt};

/// Objects in flight at once when not told otherwise: against a real API server on two cores,
/// 8 made a run about twice as fast as one after another, and 16 only 10 to 20 % faster again
/// while doubling what one run asks of an API server it shares with everything else
/// (`benches/README.md`, "Deletes at API speed").
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The most objects in flight a run accepts: more only queue at the API server's own
/// per-client limits (its priority and fairness) and hold more archives in memory at once.
pub const MAX_CONCURRENCY: usize = 64;

/// Runs `work` on each of `items`, at most `concurrency` at once (at least 1), and answers
/// their results in the order of `items`. It starts slowly, as Kubernetes' own controllers
/// create Pods (`slowStartBatch`): one item alone, and each item that ends doubles how many may
/// be at work, up to `concurrency`. The first object of a run so proves the path (the rights,
/// the sink, the store, the lock) before others start, and a fault that would fail every object
/// meets one or two, not `concurrency`. An item starts only when there is room, so a condition
/// `work` reads at its start (a stop, a lost lock) is read when it truly starts; an item that
/// ended makes room at once, however slow the ones before it.
pub async fn in_order<T, R, F, Fut>(
    items: impl IntoIterator<Item = T>,
    concurrency: usize,
    mut work: F,
) -> Vec<R>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = R>,
{
    let mut items = items.into_iter().enumerate();
    let mut running = FuturesUnordered::new();
    let mut done: Vec<(usize, R)> = Vec::new();
    loop {
        let ended = u32::try_from(done.len()).unwrap_or(u32::MAX);
        let room = concurrency
            .max(1)
            .min(1_usize.checked_shl(ended).unwrap_or(usize::MAX));
        while running.len() < room {
            let Some((i, item)) = items.next() else {
                break;
            };
            let future = work(item);
            running.push(async move { (i, future.await) });
        }
        match running.next().await {
            Some(result) => done.push(result),
            None => break,
        }
    }
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

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
    fn one_alone_first_then_doubling_up_to_concurrency_results_in_order() {
        for (concurrency, expected_peak) in [(0, 1), (1, 1), (3, 3), (8, 8), (16, 16)] {
            let (now, peak, at_start) = (Cell::new(0), Cell::new(0), RefCell::new(Vec::new()));
            let results = block_on(in_order(0..30, concurrency, |i| {
                let (now, peak, at_start) = (&now, &peak, &at_start);
                async move {
                    at_start.borrow_mut().push(now.get());
                    now.set(now.get() + 1);
                    peak.set(peak.get().max(now.get()));
                    // Later items end sooner: the order of results is still the items'.
                    for _ in 0..(40 - i) {
                        yield_once().await;
                    }
                    now.set(now.get() - 1);
                    i * 2
                }
            }));
            assert_eq!(results, (0..30).map(|i| i * 2).collect::<Vec<_>>());
            assert_eq!(peak.get(), expected_peak, "concurrency {concurrency}");
            // The first item ran alone: nothing was at work when the second started.
            assert_eq!(at_start.borrow()[..2], [0, 0], "concurrency {concurrency}");
        }
    }

    #[test]
    fn results_keep_the_items_order_whatever_the_order_they_end_in() {
        let results = block_on(in_order(0..20, 64, |i| async move {
            for _ in 0..(20 - i) {
                yield_once().await;
            }
            i
        }));
        assert_eq!(results, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn an_item_that_ended_makes_room_however_slow_the_ones_before_it() {
        let ended = RefCell::new(Vec::new());
        block_on(in_order(0..10, 2, |i| {
            let ended = &ended;
            async move {
                for _ in 0..if i == 1 { 100 } else { 1 } {
                    yield_once().await;
                }
                ended.borrow_mut().push(i);
            }
        }));
        // Item 1 held one place until it ended last; the other place served the rest.
        assert_eq!(ended.into_inner(), [0, 2, 3, 4, 5, 6, 7, 8, 9, 1]);
    }
}
