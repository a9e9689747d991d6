//! The planned calls run (state `Proposed`, decided) and recorded (state
//! `Ran`, decided): concurrently when all are read-only, each under the
//! per-call timeout, the run's deadline and abort; every output stored as a
//! variable and cut for the model; every call given exactly one result, in
//! call order, whether it ran or not.

use std::sync::Arc;

use toolhost_content::ErrorKind;
use tracing::{debug, info};

use super::ctx::{Ctx, Timing};
use super::result::ToolCallRecord;
use super::state::{Action, Executed, Planned, RoundInfo, RunState, State, Stop};
use crate::events::AgentEvent;
use crate::status::Status;
use crate::tools::{ToolCallInfo, ToolOutcome};
use crate::vars::{READ_VAR, truncate_for_model};
use crate::{Message, Usage};

impl Ctx<'_> {
    /// State `Proposed`, decided: runs the calls that are to run (in
    /// parallel when all are read-only), and gives every other call its
    /// result without running it.
    pub(super) async fn run_planned(
        &self,
        round: u32,
        planned: Vec<Planned>,
        plan_stop: Option<Stop>,
        completion: RoundInfo,
    ) -> State {
        let runnable: Vec<usize> = planned
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.action, Action::Run { .. }))
            .map(|(i, _)| i)
            .collect();
        let parallel = self.opts.parallel_read_only
            && runnable.len() > 1
            && runnable.iter().all(|&i| {
                matches!(
                    planned[i].action,
                    Action::Run {
                        read_only: true,
                        ..
                    }
                )
            });
        debug!(
            round,
            calls = planned.len(),
            parallel,
            "executing tool calls"
        );

        let mut executed: Vec<Option<Executed>> = Vec::new();
        executed.resize_with(planned.len(), || None);
        let mut exec_stop: Option<Stop> = self.stop_now();
        if exec_stop.is_none() && parallel {
            let results = futures::future::join_all(
                runnable.iter().map(|&i| self.run_call(round, &planned[i])),
            )
            .await;
            for (&i, r) in runnable.iter().zip(results) {
                if exec_stop.is_none() {
                    exec_stop = r.stop.clone();
                }
                executed[i] = Some(r);
            }
        } else if exec_stop.is_none() {
            for &i in &runnable {
                if let Some(s) = self.stop_now() {
                    exec_stop = Some(s);
                    break;
                }
                let r = self.run_call(round, &planned[i]).await;
                let stop = r.stop.clone();
                executed[i] = Some(r);
                if stop.is_some() {
                    exec_stop = stop;
                    break;
                }
            }
        }
        // An abort or deadline during execution wins over a doom loop found earlier.
        let stop = exec_stop.or(plan_stop);

        let done = planned
            .into_iter()
            .zip(executed)
            .map(|(p, e)| match (&p.action, e) {
                (Action::Run { .. }, Some(e)) => (p, e),
                (action, _) => {
                    let outcome = match action {
                        Action::Reject { message, kind } => ToolOutcome {
                            details: Some(serde_json::json!({
                                "kind": kind.as_str(),
                                "message": message,
                                "arguments": p.call.arguments,
                            })),
                            ..error_outcome(message.clone(), kind.clone())
                        },
                        Action::Skip { reason } => {
                            error_outcome(format!("not run: {reason}"), ErrorKind::NotRun)
                        }
                        Action::Repeat { output }
                        | Action::Searched {
                            output,
                            is_error: false,
                        } => ok_outcome(output.clone()),
                        Action::Searched { output, .. } => {
                            error_outcome(output.clone(), ErrorKind::InvalidArguments)
                        }
                        Action::Supplied {
                            output,
                            is_error: true,
                        } => error_outcome(output.clone(), ErrorKind::ToolFailed),
                        Action::Supplied { output, .. } => ok_outcome(output.clone()),
                        Action::Run { .. } => {
                            let reason = match &stop {
                                Some(s) => s.reason(),
                                None => "the loop stopped".to_owned(),
                            };
                            error_outcome(format!("not run: {reason}"), ErrorKind::NotRun)
                        }
                    };
                    let e = self.finish(round, &p, outcome, self.start_timing(), None);
                    (p, e)
                }
            })
            .collect();
        State::Ran {
            round,
            done,
            stop,
            completion,
        }
    }

    /// Runs one call under the per-call timeout, the run's deadline and abort.
    async fn run_call(&self, round: u32, p: &Planned) -> Executed {
        let builtin = matches!(p.action, Action::Run { builtin: true, .. });
        let timing = self.start_timing();
        self.emit(AgentEvent::ToolCallRunning {
            round,
            call_id: p.call.id.clone(),
            tool: p.tool.clone(),
            started_at_ms: timing.at_ms,
        });
        let mut stop = None;
        let outcome = if builtin {
            match self
                .opts
                .vars
                .call_read_var(&p.args, self.opts.max_output_bytes)
            {
                Ok(page) => ok_outcome(page),
                Err(e) => error_outcome(e.to_string(), ErrorKind::InvalidArguments),
            }
        } else {
            // Cancelled when the run stops, and once the call is over (so a
            // native tool's own tasks end with it, timeouts included).
            let abort = self.opts.abort.child_token();
            let _cancel_when_over = abort.clone().drop_guard();
            let progress = self.opts.events.clone().map(|sink| {
                let (call_id, tool) = (p.call.id.clone(), p.tool.clone());
                let reports = std::sync::atomic::AtomicU32::new(0);
                let f: crate::tools::ProgressFn = Arc::new(move |message: &str, fraction| {
                    let n = reports.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n < crate::tools::MAX_PROGRESS_REPORTS {
                        sink(AgentEvent::ToolCallProgress {
                            round,
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            message: message.to_owned(),
                            fraction: fraction
                                .filter(|f| f.is_finite())
                                .map(|f| f.clamp(0.0, 1.0)),
                        });
                    }
                });
                f
            });
            let info = ToolCallInfo {
                call_id: p.call.id.clone(),
                session_id: self.opts.session_id.clone(),
                agent: self.opts.agent.clone(),
                round,
                abort: abort.clone(),
                progress,
                vars: Some(self.run_vars()),
            };
            let call = self.tools.call(&p.tool, p.args.clone(), info);
            let limited = async {
                match self.opts.tool_timeout {
                    Some(limit) => match tokio::time::timeout(limit, call).await {
                        Ok(outcome) => outcome,
                        Err(_) => error_outcome(
                            format!(
                                "`{}` did not finish within {} ms and was stopped",
                                p.tool,
                                limit.as_millis()
                            ),
                            ErrorKind::Timeout,
                        ),
                    },
                    None => call.await,
                }
            };
            tokio::select! {
                biased;
                s = self.interrupted() => {
                    let (text, kind) = match s.status {
                        Status::Timeout => ("stopped: the run's time limit passed", ErrorKind::Timeout),
                        _ => ("stopped: the run was aborted", ErrorKind::Aborted),
                    };
                    stop = Some(s);
                    error_outcome(text.to_owned(), kind)
                }
                outcome = limited => outcome,
            }
        };
        let mut outcome = outcome;
        // The executor stopped the run (the user denied the call and chose
        // to stop): no more calls, no more requests.
        if stop.is_none() && outcome.error_kind == Some(ErrorKind::Aborted) {
            stop = Some(Stop {
                status: Status::Aborted,
                error: Some(outcome.output.clone()),
            });
        }
        // A failed call's details say what was sent (for user interfaces).
        if outcome.is_error
            && let Some(serde_json::Value::Object(d)) = &mut outcome.details
            && !d.contains_key("arguments")
        {
            d.insert("arguments".into(), p.args.clone());
        }
        self.finish(round, p, outcome, timing, stop)
    }

    /// Stores and truncates the output of a finished call and reports it.
    fn finish(
        &self,
        round: u32,
        p: &Planned,
        outcome: ToolOutcome,
        timing: Timing,
        stop: Option<Stop>,
    ) -> Executed {
        let (call_id, tool, args) = (&p.call.id, p.tool.as_str(), &p.args);
        let duration_ms = u64::try_from(timing.instant.elapsed().as_millis()).unwrap_or(u64::MAX);
        let max = self.opts.max_output_bytes;
        // Keep every successful result (except read_var's own pages and
        // the loop's tool search, whose answer a model would only read
        // again) and any long one, so that the model and later turns can
        // read it back.
        let searched = matches!(p.action, Action::Searched { .. });
        let store =
            (!outcome.is_error && tool != READ_VAR && !searched) || outcome.output.len() > max;
        let var = store.then(|| self.opts.vars.insert(outcome.output.clone()));
        let for_model = match &var {
            Some(v) => truncate_for_model(&outcome.output, max, v),
            None => outcome.output.clone(),
        };
        if outcome.is_error {
            debug!(%tool, kind = ?outcome.error_kind, "tool call failed");
            self.emit(AgentEvent::ToolCallError {
                round,
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                args: args.clone(),
                output: outcome.output.clone(),
                error_kind: outcome.error_kind.clone(),
                details: outcome.details.clone(),
                duration_ms,
                steps: outcome.steps.clone(),
            });
        } else {
            self.emit(AgentEvent::ToolCallCompleted {
                round,
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                args: args.clone(),
                output: outcome.output.clone(),
                details: outcome.details.clone(),
                var: var.clone(),
                duration_ms,
                steps: outcome.steps.clone(),
                cached: outcome.cached,
            });
        }
        Executed {
            outcome,
            for_model,
            var,
            started_at_ms: timing.at_ms,
            ended_at_ms: self.now_ms(),
            duration_ms,
            stop,
            replaced: false,
        }
    }

    /// State `Ran`, decided: appends the results in call order (every call
    /// gets exactly one result) and goes on.
    pub(super) fn record_round(
        &self,
        run: &mut RunState,
        round: u32,
        done: Vec<(Planned, Executed)>,
        stop: Option<Stop>,
        info: RoundInfo,
    ) -> State {
        let n_calls = done.len();
        for (p, e) in done {
            if let (true, Some(var)) = (e.replaced, &e.var) {
                self.opts.vars.replace(var, e.outcome.output.clone());
            }
            self.record(run, round, info.usage, p, e);
        }
        self.end_round(round, info, n_calls);

        match stop {
            // The model handed back the last result: that is the answer.
            Some(_) if run.settled => {
                if let Some(text) = super::answer::from_results(&run.history) {
                    info!(
                        round,
                        "the model handed back the last result; it is the answer"
                    );
                    run.text.clone_from(&text);
                    run.messages.push(Message::assistant(text));
                    run.answer_source = super::result::AnswerSource::Results;
                }
                State::done(Status::Completed, None)
            }
            // A refused doom loop: the model has what it needs; ask for the
            // answer rather than end with nothing.
            Some(stop) if stop.status == Status::DoomLoop => State::FinalAnswer {
                round: round + 1,
                status: stop.status,
                error: stop.error,
            },
            Some(stop) => stop.into_state(),
            None => State::Request { round: round + 1 },
        }
    }

    /// Appends the result of one call to the messages and the history.
    fn record(&self, run: &mut RunState, round: u32, round_usage: Usage, p: Planned, e: Executed) {
        let Planned {
            call, tool, args, ..
        } = p;
        let is_error = e.outcome.is_error;
        // What the model gets of the result's blocks beyond its text.
        let attachments: Vec<_> = e
            .outcome
            .content
            .iter()
            .filter(|c| c.as_text().is_none() && c.is_for_assistant())
            .cloned()
            .collect();
        run.messages.push(
            Message::tool_result(&call, e.for_model.clone(), is_error)
                .with_attachments(attachments),
        );
        run.history.push(ToolCallRecord {
            call_id: call.id,
            tool,
            requested_name: call.name,
            arguments: call.arguments,
            args,
            output: e.for_model,
            is_error,
            error_kind: e.outcome.error_kind,
            details: e.outcome.details,
            var: e.var,
            started_at_ms: e.started_at_ms,
            ended_at_ms: e.ended_at_ms,
            duration_ms: e.duration_ms,
            round,
            round_usage,
            steps: e.outcome.steps,
            cached: e.outcome.cached,
        });
    }
}

fn error_outcome(output: String, kind: ErrorKind) -> ToolOutcome {
    ToolOutcome {
        error_kind: Some(kind),
        is_error: true,
        ..ok_outcome(output)
    }
}

fn ok_outcome(output: String) -> ToolOutcome {
    ToolOutcome {
        output,
        details: None,
        content: Vec::new(),
        is_error: false,
        error_kind: None,
        steps: Vec::new(),
        cached: false,
    }
}
