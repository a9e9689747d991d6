//! Filling a plugin's ready instances (`ready.rs`) once it is quiet: after
//! each call, one task per plugin waits until no call has started for the
//! plugin's quiet time, drops the used sandboxes, and instantiates new ones
//! while a pool slot is spare.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::api::Linked;
use crate::plugin::Plugin;
use crate::pool::Pool;
use crate::ready::{Fresh, Prepared};

/// After a call of `plugin` (which has ready instances): keeps `used` (the
/// ready instance the call ran in, if it did) to be dropped, and makes sure
/// a task will do that and refill once the plugin is quiet.
pub(crate) fn after_call(pool: &Pool, plugin: &Arc<Plugin>, used: Option<Fresh>) {
    let ready = &plugin.ready;
    if let Some(used) = used {
        ready.used.lock().push(used);
    }
    if ready.scheduled.swap(true, Ordering::AcqRel) {
        return;
    }
    let (pool, plugin) = (pool.clone(), plugin.clone());
    tokio::spawn(async move {
        let ready = &plugin.ready;
        loop {
            let seen = ready.calls.load(Ordering::Relaxed);
            tokio::time::sleep(ready.quiet).await;
            if ready.calls.load(Ordering::Relaxed) != seen {
                continue;
            }
            drop(std::mem::take(&mut *ready.used.lock()));
            refill(&pool, &plugin).await;
            ready.scheduled.store(false, Ordering::Release);
            // A call that ended while this task was finishing left its
            // sandbox without scheduling: take it on, or leave it to the
            // task that did.
            if ready.used.lock().is_empty() || ready.scheduled.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    });
}

/// Instantiates instances until `plugin` has its target ready, a slot is
/// not free, or one fails.
async fn refill(pool: &Pool, plugin: &Plugin) {
    let ready = &plugin.ready;
    while !ready.broken.load(Ordering::Relaxed) && ready.count() < ready.target {
        let Some(prepared) = prepare(pool, plugin).await else {
            return;
        };
        ready.ready.lock().push(prepared);
    }
}

/// One ready instance of `plugin`: a spare slot, a sandbox, the component
/// instantiated in it under the plugin's time limit.
async fn prepare(pool: &Pool, plugin: &Plugin) -> Option<Prepared> {
    let Linked::Tool(pre) = &plugin.pre else {
        return None;
    };
    let (slot, budget) = pool.try_spare(plugin.quota())?;
    let broken = |why: String| {
        tracing::warn!(plugin = %plugin.id(), "no ready instances for this version: {why}");
        plugin.ready.broken.store(true, Ordering::Relaxed);
    };
    let mut sandbox = match pool.sandbox(&plugin.sandbox) {
        Ok(sandbox) => sandbox,
        Err(why) => {
            broken(why);
            return None;
        }
    };
    sandbox.begin("(ready instance)", None, None);
    match sandbox
        .call(async |store| pre.instantiate(&mut *store).await)
        .await
    {
        Ok(instance) => Some(Prepared {
            fresh: Fresh {
                sandbox,
                instance,
                _slot: slot,
            },
            _budget: budget,
        }),
        Err(fault) => {
            broken(fault.to_string());
            None
        }
    }
}
