//! Where a tool call an MCP server runs does its work.
//!
//! On a Tokio runtime with several workers a call runs on the task that
//! serves its request, and the scheduler spreads calls over the workers.
//! On a runtime with one worker (what `host mcp` serves stdio on: one
//! client, mostly one call at a time, and every hop between threads costs
//! more than a small call itself; `docs/log.md`, performance
//! round 4) that would run every call on that one thread. So there a call
//! runs on the serving task only while it is the server's only call in
//! flight; a call that starts while another runs gets a thread of its own
//! (Tokio's blocking pool, driving the call with [`Handle::block_on`]), so
//! calls that need CPU still run in parallel, one core each. At most one
//! such thread per core is taken (more would only share the same cores);
//! a call that overlaps more runs on the serving task, where the guest's
//! epoch yields let it share the worker.
//!
//! A guest yields to the executor at every epoch tick (`toolhost-runtime`'s
//! sandbox), so a long call running on the one worker does not keep its
//! server from reading the next request: the runtime polls for I/O every
//! few tasks it runs (`host mcp` sets Tokio's `event_interval` for that).
//!
//! On a current-thread runtime the thread of its own drives the call's
//! timers and I/O only while the runtime's own thread runs
//! `Runtime::block_on`, as a server's does.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// The calls of one server in flight, shared by its clones.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    /// Calls in flight.
    calls: Arc<AtomicUsize>,
    /// Calls running on a thread of their own.
    threads: Arc<AtomicUsize>,
    /// The most calls on threads of their own at once (the cores).
    max_threads: usize,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight::with_threads(std::thread::available_parallelism().map_or(1, usize::from))
    }
}

/// One call counted until dropped.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    /// At most `max_threads` calls on threads of their own at once.
    pub(crate) fn with_threads(max_threads: usize) -> Self {
        InFlight {
            calls: Arc::default(),
            threads: Arc::default(),
            max_threads,
        }
    }

    /// Takes one of the threads for overlapping calls, if one is free.
    fn take_thread(&self) -> Option<Counted<'_>> {
        let taken = self.threads.fetch_add(1, Ordering::AcqRel);
        let counted = Counted(&self.threads);
        (taken < self.max_threads).then_some(counted)
    }

    /// Runs `call` (see the module docs for where) until it ends, or until
    /// `cancelled` is (`None`: the call was dropped, which stops its
    /// sandbox).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        call: impl Future<Output = T> + Send + 'static,
        cancelled: &CancellationToken,
    ) -> Option<T> {
        let others = self.calls.fetch_add(1, Ordering::AcqRel);
        let _counted = Counted(&self.calls);
        let handle = Handle::current();
        let thread = if others == 0 || handle.metrics().num_workers() > 1 {
            None
        } else {
            self.take_thread()
        };
        let Some(_thread) = thread else {
            return tokio::select! {
                r = call => Some(r),
                () = cancelled.cancelled() => None,
            };
        };
        // Another call is running on the runtime's one worker: this one
        // gets a thread of its own. It stops when the request is
        // cancelled or this future is dropped.
        let stop = cancelled.child_token();
        let _stop_when_dropped = stop.clone().drop_guard();
        let thread = tokio::task::spawn_blocking(move || {
            handle.block_on(async move {
                tokio::select! {
                    r = call => Some(r),
                    () = stop.cancelled() => None,
                }
            })
        });
        match thread.await {
            Ok(outcome) => outcome,
            // A call that panicked panics here, as it would have on the
            // serving task: never reported as a cancelled call.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OS thread a future is polled on.
    async fn thread_of_call(
        in_flight: &InFlight,
        gate: Arc<tokio::sync::Barrier>,
    ) -> std::thread::ThreadId {
        in_flight
            .run(
                async move {
                    // Both calls are in flight before either ends.
                    gate.wait().await;
                    std::thread::current().id()
                },
                &CancellationToken::new(),
            )
            .await
            .unwrap()
    }

    /// A runtime of one worker, as `host mcp` serves on.
    fn one_worker() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn on_one_worker_an_overlapping_call_runs_on_a_thread_of_its_own() {
        let rt = one_worker();
        let in_flight = InFlight::default();
        let gate = Arc::new(tokio::sync::Barrier::new(2));
        let (first, second) = rt.block_on(async {
            let a = tokio::spawn({
                let (f, g) = (in_flight.clone(), gate.clone());
                async move { thread_of_call(&f, g).await }
            });
            let b = tokio::spawn({
                let (f, g) = (in_flight.clone(), gate.clone());
                async move { thread_of_call(&f, g).await }
            });
            (a.await.unwrap(), b.await.unwrap())
        });
        assert_ne!(first, second, "the two calls ran on one thread");
        assert_eq!(in_flight.calls.load(Ordering::Acquire), 0);
        assert_eq!(in_flight.threads.load(Ordering::Acquire), 0);
    }

    #[test]
    fn overlapping_calls_beyond_the_cores_run_on_the_serving_worker() {
        let rt = one_worker();
        // One thread for overlapping calls (as on a machine of one core).
        let in_flight = InFlight::with_threads(1);
        let gate = Arc::new(tokio::sync::Barrier::new(3));
        let worker = rt.block_on(async {
            tokio::spawn(async { std::thread::current().id() })
                .await
                .unwrap()
        });
        let threads = rt.block_on(async {
            let calls: Vec<_> = (0..3)
                .map(|_| {
                    let (f, g) = (in_flight.clone(), gate.clone());
                    tokio::spawn(async move { thread_of_call(&f, g).await })
                })
                .collect();
            let mut threads = Vec::new();
            for call in calls {
                threads.push(call.await.unwrap());
            }
            threads
        });
        let on_worker = threads.iter().filter(|t| **t == worker).count();
        assert_eq!(
            on_worker, 2,
            "the first call and the one beyond the bound: {threads:?}"
        );
        assert_eq!(in_flight.threads.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_lone_call_runs_on_the_task_that_serves_it() {
        let rt = one_worker();
        let in_flight = InFlight::default();
        let (serving, called) = rt.block_on(async {
            tokio::spawn(async move {
                let serving = std::thread::current().id();
                let called = in_flight
                    .run(
                        async { std::thread::current().id() },
                        &CancellationToken::new(),
                    )
                    .await
                    .unwrap();
                (serving, called)
            })
            .await
            .unwrap()
        });
        assert_eq!(serving, called);
    }

    #[test]
    fn a_cancelled_call_on_its_own_thread_is_dropped() {
        let rt = one_worker();
        let in_flight = InFlight::default();
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        rt.block_on(async {
            let cancel = CancellationToken::new();
            // A first call holds the one worker's place in flight.
            let first = CancellationToken::new();
            let hold = tokio::spawn({
                let (f, first) = (in_flight.clone(), first.clone());
                async move { f.run(std::future::pending::<()>(), &first).await }
            });
            tokio::task::yield_now().await;
            struct Flag(Arc<std::sync::atomic::AtomicBool>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Release);
                }
            }
            let flag = Flag(dropped.clone());
            let second = tokio::spawn({
                let (f, c) = (in_flight.clone(), cancel.clone());
                async move {
                    f.run(
                        async move {
                            let _flag = flag;
                            std::future::pending::<()>().await;
                        },
                        &c,
                    )
                    .await
                }
            });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            cancel.cancel();
            assert_eq!(second.await.unwrap(), None);
            first.cancel();
            assert_eq!(hold.await.unwrap(), None);
        });
        assert!(dropped.load(Ordering::Acquire), "the call was not dropped");
    }

    /// A call that panics on a thread of its own is a panic where it was
    /// awaited, as on the serving task, never a call the client cancelled.
    #[test]
    fn a_panic_on_its_own_thread_is_not_reported_as_a_cancelled_call() {
        let rt = one_worker();
        let in_flight = InFlight::default();
        rt.block_on(async {
            let first = CancellationToken::new();
            let hold = tokio::spawn({
                let (f, first) = (in_flight.clone(), first.clone());
                async move { f.run(std::future::pending::<()>(), &first).await }
            });
            tokio::task::yield_now().await;
            let second = tokio::spawn({
                let f = in_flight.clone();
                async move {
                    f.run(
                        async { panic!("the call failed") },
                        &CancellationToken::new(),
                    )
                    .await
                }
            });
            let joined: Result<Option<()>, _> = second.await;
            assert!(
                joined.as_ref().is_err_and(tokio::task::JoinError::is_panic),
                "{joined:?}"
            );
            first.cancel();
            assert_eq!(hold.await.unwrap(), None);
        });
    }
}
