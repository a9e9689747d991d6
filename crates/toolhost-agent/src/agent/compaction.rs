//! Keeping a run's history inside the model's context window: before a
//! request that would pass the policy's trigger, and once after the server
//! refused one as too long, old tool outputs become stubs naming their
//! variable, then the oldest turns a summary (the policy and its pieces are
//! in [`context`](crate::context)).

use tracing::{info, warn};

use super::ctx::Ctx;
use super::state::RunState;
use crate::context::Compaction;
use crate::events::AgentEvent;
use crate::provider::CompletionRequest;
use crate::{Message, Usage};

impl Ctx<'_> {
    /// Compacts `run.messages` when the next request would pass the policy's
    /// trigger (see [`context`](crate::context)); `forced` after the server
    /// refused a request as too long, down to half of it at most. Returns
    /// whether anything changed.
    /// `fixed_chars`: the system prompt's and the tools' characters.
    pub(super) async fn fit_context(
        &self,
        run: &mut RunState,
        round: u32,
        fixed_chars: usize,
        forced: bool,
    ) -> bool {
        use crate::context::{
            REMOVED_MARK, SUMMARY_MARK, protected, prunable, pruned_stub, summary_cut,
        };
        let policy = &self.opts.context;
        let counter = &policy.counter;
        let known = policy.window_for(&self.opts.model);
        if known.is_none() && !forced {
            return false;
        }
        let fixed = counter.estimate_chars(fixed_chars);
        let before = fixed.saturating_add(counter.messages(&run.messages));
        let window = known.unwrap_or(before);
        // Room for the reply: max_tokens, at most a quarter of the window.
        let reply = self.opts.max_tokens.unwrap_or(window / 8).min(window / 4);
        let room = u64::from(window.saturating_sub(reply));
        let share =
            |percent: u8| u32::try_from(room * u64::from(percent) / 100).unwrap_or(u32::MAX);
        let mut target = share(policy.target_percent);
        if forced {
            target = target.min(before / 2);
        } else if before <= share(policy.trigger_percent) {
            return false;
        }
        let mut c = Compaction {
            tokens_before: before,
            window,
            ..Compaction::default()
        };
        let mut now = before;
        let p = protected(&run.messages);
        // 1. Old tool outputs become stubs naming their variable.
        for i in prunable(&run.messages, p) {
            if now <= target {
                break;
            }
            let m = &run.messages[i];
            let known = m.tool_call_id.as_deref().and_then(|id| {
                run.history
                    .iter()
                    .rev()
                    .find(|h| h.call_id == id)
                    .and_then(|h| h.var.clone())
            });
            let var = known.unwrap_or_else(|| self.opts.vars.insert(m.content.clone()));
            let was = counter.message(m);
            let stub = pruned_stub(m.content.len(), Some(&var));
            let m = &mut run.messages[i];
            m.content = stub;
            now = now.saturating_sub(was).saturating_add(counter.message(m));
            c.pruned_outputs += 1;
            c.pruned_vars.push(var);
        }
        // 2. The oldest turns become a summary.
        if now > target
            && let Some(cut) = summary_cut(counter, &run.messages, p, fixed, target)
        {
            let summary = if policy.summarize {
                let (summary, usage) = self.summarize(&run.messages[..cut], room).await;
                run.usage += usage;
                summary
            } else {
                None
            };
            c.summarized_by_model = summary.is_some();
            let text = match summary {
                Some(s) => format!("{SUMMARY_MARK}\n{s}"),
                None => format!("{REMOVED_MARK} ({cut} messages)"),
            };
            run.messages.splice(..cut, [Message::user(text)]);
            c.summarized_messages = u32::try_from(cut).unwrap_or(u32::MAX);
            now = fixed.saturating_add(counter.messages(&run.messages));
        }
        if c.pruned_outputs == 0 && c.summarized_messages == 0 {
            return false;
        }
        c.tokens_after = now;
        run.compactions = run.compactions.saturating_add(1);
        info!(
            round,
            pruned = c.pruned_outputs,
            summarized = c.summarized_messages,
            before,
            after = now,
            window,
            "history compacted to fit the context window"
        );
        self.emit(AgentEvent::ContextCompacted {
            round,
            compaction: c,
        });
        true
    }

    /// Asks the model for a summary of `messages` (no tools); `None` when it
    /// fails or says nothing; and the tokens it used.
    async fn summarize(&self, messages: &[Message], room: u64) -> (Option<String>, Usage) {
        let max_tokens = u32::try_from((room / 4).min(1024)).unwrap_or(1024);
        // The transcript takes at most half the room.
        let max_chars = self.opts.context.counter.chars_for(room / 2);
        let request = CompletionRequest {
            model: self.opts.model.clone(),
            system: Some(crate::context::SUMMARY_PROMPT.to_owned()),
            messages: vec![Message::user(crate::context::as_transcript(
                messages, max_chars,
            ))],
            max_tokens: Some(max_tokens),
            ..CompletionRequest::default()
        };
        let r = tokio::select! {
            biased;
            _ = self.interrupted() => return (None, Usage::default()),
            r = self.provider.complete(&request, &|_| {}, &self.opts.abort) => r,
        };
        match r {
            Ok(c) => {
                let (text, _) = crate::think::split_think(&c.message.content);
                let text = text.trim();
                ((!text.is_empty()).then(|| text.to_owned()), c.usage)
            }
            Err(e) => {
                warn!(error = %e, "the model could not summarise the history");
                (None, Usage::default())
            }
        }
    }
}
