//! The live feed of calls ([`Runtime::watch_calls`](crate::Runtime::watch_calls)),
//! for an operator's console: each call when it starts, and when it
//! finishes with the policy's decision, the time of each step and the
//! outcome.
//!
//! Free when nobody watches: a call looks once (`start`) and, when nobody
//! does, makes nothing (no clock read, no allocation) and carries `None`
//! as its recorder, which every function here returns on at once. The
//! steps call these small functions, as they call `trace.rs`: `begin` and
//! `end` around `admit`, `execute` and `conclude`; `decided` where the
//! policy decides; `since` and `approval` where an approval is answered.
//!
//! A watched call sends [`CallPhase::Started`] before lookup and
//! [`CallPhase::Finished`] when its recorder goes: after the last step,
//! or when the call is dropped half-way (then with outcome `aborted`).
//! Both carry the call's [`seq`](CallEvent::seq), unique in the runtime:
//! call ids are the callers' (every MCP client's are `mcp-1`, `mcp-2`…),
//! so only `seq` tells two calls apart. The tool's name and the id are
//! the caller's as `named.rs` bounds them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::sync::broadcast;
use toolhost_content::ErrorKind;
use toolhost_policy::{Decision, Evaluation};

use crate::call::named::Named;
use crate::call::{Call, CallContext, ToolResult};
use crate::error::CallError;
use crate::feed::{CallEvent, CallPhase, Feed, StepTiming};
use crate::plugin::Plugin;

/// The longest note, in characters.
const MAX_NOTE_CHARS: usize = 200;

/// What a watched call records on its way; sends the call's `Finished`
/// event when it goes.
pub(crate) struct Recorder {
    sender: broadcast::Sender<Arc<CallEvent>>,
    started: Instant,
    seq: u64,
    id: String,
    tool: String,
    agent: Option<String>,
    client: Option<String>,
    seen: Mutex<Seen>,
}

/// What the steps reported.
struct Seen {
    plugin: Option<Arc<Plugin>>,
    decision: Option<Decision>,
    rule: Option<Arc<str>>,
    steps: Vec<StepTiming>,
    /// `None` until the call finished: dropped before, it was aborted.
    outcome: Option<String>,
    cached: bool,
}

/// The start of a step of a watched call.
pub(crate) struct Timing {
    /// Where the step is in the call's list (steps are listed as they start).
    index: usize,
    at: Instant,
}

/// At the start of a call (of `named.tool`): when anyone watches, sends
/// its `Started` event and returns its recorder; otherwise `None`, having
/// made nothing.
pub(crate) fn start(feed: &Feed, named: &Named<'_>, cx: &CallContext) -> Option<Recorder> {
    if !feed.watched() {
        return None;
    }
    let recorder = Recorder {
        sender: feed.sender.clone(),
        started: Instant::now(),
        seq: feed.next_seq.fetch_add(1, Ordering::Relaxed),
        id: named.id.clone(),
        tool: named.tool.clone().into_owned(),
        agent: cx.agent.clone(),
        client: cx.client.clone(),
        seen: Mutex::new(Seen {
            plugin: None,
            decision: None,
            rule: None,
            steps: Vec::with_capacity(4),
            outcome: None,
            cached: false,
        }),
    };
    recorder.send(CallEvent {
        seq: recorder.seq,
        id: recorder.id.clone(),
        tool: recorder.tool.clone(),
        agent: recorder.agent.clone(),
        client: recorder.client.clone(),
        at_ms: now_ms(),
        phase: CallPhase::Started,
    });
    Some(recorder)
}

/// Records the plugin lookup found.
pub(crate) fn resolved(call: &Call<'_>) {
    if let Some(r) = call.watch {
        r.seen.lock().plugin = Some(call.target.plugin.clone());
    }
}

/// Records the policy's decision (the first one: a before-hook's rewrite
/// is judged again, and the call keeps its first).
pub(crate) fn decided(call: &Call<'_>, evaluation: &Evaluation) {
    if let Some(r) = call.watch {
        let mut seen = r.seen.lock();
        if seen.decision.is_none() {
            seen.decision = Some(evaluation.decision);
            seen.rule = Some(evaluation.decided_by.clone());
        }
    }
}

/// The start of `step`, listed now.
pub(crate) fn begin(call: &Call<'_>, step: &'static str) -> Option<Timing> {
    let r = call.watch?;
    let mut seen = r.seen.lock();
    seen.steps.push(StepTiming {
        step,
        micros: 0,
        note: None,
    });
    Some(Timing {
        index: seen.steps.len() - 1,
        at: Instant::now(),
    })
}

/// The end of a step begun with [`begin`], with `note`.
pub(crate) fn end(call: &Call<'_>, timing: Option<Timing>, note: impl FnOnce() -> Option<String>) {
    let (Some(r), Some(timing)) = (call.watch, timing) else {
        return;
    };
    let micros = micros(timing.at.elapsed());
    let note = note().map(bounded);
    if let Some(step) = r.seen.lock().steps.get_mut(timing.index) {
        step.micros = micros;
        step.note = note;
    }
}

/// The end of `admit`, noted with the policy's decision and rule
/// (`allow by default (allow)`).
pub(crate) fn admitted(call: &Call<'_>, timing: Option<Timing>) {
    let Some(r) = call.watch else {
        return;
    };
    let note = {
        let seen = r.seen.lock();
        seen.decision
            .zip(seen.rule.as_deref())
            .map(|(decision, rule)| format!("{decision} by {rule}"))
    };
    end(call, timing, || note);
}

/// The end of `execute`, noted `cached` when the result cache answered.
pub(crate) fn executed(
    call: &Call<'_>,
    timing: Option<Timing>,
    result: &Result<ToolResult, CallError>,
) {
    end(call, timing, || {
        matches!(result, Ok(r) if r.cached).then(|| "cached".to_owned())
    });
}

/// When an approval question starts (`None` unwatched: no clock read).
pub(crate) fn since(call: &Call<'_>) -> Option<Instant> {
    call.watch.map(|_| Instant::now())
}

/// An `approval` step from `since` to now: who answered and how.
pub(crate) fn approval(call: &Call<'_>, since: Option<Instant>, note: impl FnOnce() -> String) {
    let (Some(r), Some(since)) = (call.watch, since) else {
        return;
    };
    let step = StepTiming {
        step: "approval",
        micros: micros(since.elapsed()),
        note: Some(bounded(note())),
    };
    r.seen.lock().steps.push(step);
}

/// Records the call's outcome and sends its `Finished` event.
pub(crate) fn finished(recorder: Option<Recorder>, result: &Result<ToolResult, CallError>) {
    let Some(recorder) = recorder else {
        return;
    };
    {
        let mut seen = recorder.seen.lock();
        seen.outcome = Some(match result {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.kind().as_str().to_owned(),
        });
        seen.cached = matches!(result, Ok(r) if r.cached);
    }
    drop(recorder);
}

impl Recorder {
    fn send(&self, event: CallEvent) {
        // Never waits: a receiver that falls behind skips the oldest
        // events; with none left, the event is dropped.
        let _ = self.sender.send(Arc::new(event));
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let micros = micros(self.started.elapsed());
        let seen = self.seen.get_mut();
        let plugin = seen.plugin.take();
        let phase = CallPhase::Finished {
            plugin: plugin.as_ref().map(|p| p.name.clone()),
            version: plugin.as_ref().map(|p| p.version_text.clone()),
            decision: seen.decision.map(|d| d.as_str().to_owned()),
            rule: seen.rule.as_deref().map(str::to_owned),
            steps: std::mem::take(&mut seen.steps),
            outcome: seen
                .outcome
                .take()
                .unwrap_or_else(|| ErrorKind::Aborted.as_str().to_owned()),
            cached: seen.cached,
            micros,
        };
        let event = CallEvent {
            seq: self.seq,
            id: std::mem::take(&mut self.id),
            tool: std::mem::take(&mut self.tool),
            agent: self.agent.take(),
            client: self.client.take(),
            at_ms: now_ms(),
            phase,
        };
        self.send(event);
    }
}

/// `note`, cut to [`MAX_NOTE_CHARS`] characters (an ellipsis ends a cut one).
fn bounded(note: String) -> String {
    // No more bytes than that, so no more characters: the common case.
    if note.len() <= MAX_NOTE_CHARS || note.chars().nth(MAX_NOTE_CHARS).is_none() {
        return note;
    }
    let mut cut: String = note.chars().take(MAX_NOTE_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_note_is_cut_to_200_characters_and_a_short_one_kept() {
        assert_eq!(bounded("allow by default".into()), "allow by default");
        let exact = "é".repeat(MAX_NOTE_CHARS);
        assert_eq!(bounded(exact.clone()), exact);
        let cut = bounded("é".repeat(MAX_NOTE_CHARS + 1));
        assert_eq!(cut.chars().count(), MAX_NOTE_CHARS);
        assert!(cut.ends_with('…'), "{cut}");
    }
}
