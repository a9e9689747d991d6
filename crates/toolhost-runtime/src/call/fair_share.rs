//! A sandboxed call's turn on its worker thread. A guest runs on the
//! async worker that polls the call (wasmtime's fibers), and a call whose
//! slot is free takes no tokio resource that counts toward tokio's
//! cooperative budget: a task making fresh calls back to back kept its
//! worker until the epoch ticker interrupted a guest, while the tasks
//! queued behind it waited — 11–17 ms at the 99.9th percentile with 8
//! callers on 2 cores, where one call takes 20 µs (the gate's
//! `p999_at_8_callers_over_p50_at_one`; 1.4 ms with this).
//!
//! After each sandboxed call, once its instance and slot are back in the
//! pool, [`after`] spends budget in proportion to the time the call's
//! execute step took (a wait for a slot included), one unit per
//! microsecond (tokio's whole budget, 128 units, then stands for about
//! 128 µs of work): a task yields once it has run that long, so the
//! others queued on its worker get their turn. A single caller pays a yield per ~128 µs of calls; a long call
//! (a Python plugin's ~1 ms) yields after every call.

use std::time::Duration;

/// The most units one call spends: tokio's budget per turn.
const MOST: u128 = 128;

/// Spends the cooperative budget of a guest call that ran `took`; yields
/// when the task's turn is used up.
pub(crate) async fn after(took: Duration) {
    let units = took.as_micros().clamp(1, MOST);
    for _ in 0..units {
        tokio::task::coop::consume_budget().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// A task that only makes "calls" (busy work with no tokio resource)
    /// lets another task on its only worker run within a turn.
    #[tokio::test(flavor = "current_thread")]
    async fn a_task_of_back_to_back_calls_lets_another_run() {
        let ran = Arc::new(AtomicBool::new(false));
        let other = tokio::spawn({
            let ran = ran.clone();
            async move { ran.store(true, Ordering::SeqCst) }
        });
        let mut calls = 0u32;
        while !ran.load(Ordering::SeqCst) {
            calls += 1;
            assert!(calls < 1_000, "the other task never ran");
            super::after(Duration::from_micros(20)).await;
        }
        other.await.unwrap();
        // 128 units at 20 a call: the turn ends on the 7th call.
        assert!(calls <= 8, "{calls} calls before the other task ran");
    }
}
