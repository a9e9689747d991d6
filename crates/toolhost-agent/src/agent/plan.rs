//! The model's calls checked before they run (state `Execute`, in call
//! order): tool names repaired (against the whole catalog when tool
//! search is on, and `search_tools` answered here), arguments parsed and their variable
//! references substituted, doom loops caught (the same call too many times
//! in a row), and a repeated read-only call answered with the result it just
//! had.

use std::collections::VecDeque;

use serde_json::Value;
use tracing::{debug, info, warn};

use super::ctx::{Callable, Ctx};
use super::named_tool::{named_not_called, quoted};
use super::options::DoomLoop;
use super::state::{Action, MAX_NAMED_ASKS, Planned, RECENT_CALLS, RunState, Stop};
use crate::ErrorKind;
use crate::ToolCall;
use crate::events::AgentEvent;
use crate::repair::{CallRejection, canonical_json, parse_arguments, resolve_tool_name};
use crate::status::Status;
use crate::tool_search::{SEARCH_TOOLS, answer, tool_text};
use crate::tools::ToolSpec;
use crate::vars::READ_VAR;

impl Ctx<'_> {
    /// Repairs names, parses arguments and checks for doom loops, in call
    /// order. Returns the plan and, when the loop must stop, why (the calls
    /// from the offending one on are then skipped).
    pub(super) async fn plan(
        &self,
        run: &mut RunState,
        round: u32,
        calls: Vec<ToolCall>,
        offer: Callable<'_>,
    ) -> (Vec<Planned>, Option<Stop>) {
        let Callable {
            tools,
            builtin,
            search,
        } = offer;
        let mut planned = Vec::with_capacity(calls.len());
        let mut stop: Option<Stop> = None;
        let cap = self.opts.max_calls_per_round;
        for (index, call) in calls.into_iter().enumerate() {
            // Past the round's bound a call is answered "not run" below, and
            // has no effect here either (no search, nothing offered anew).
            let within = index < cap;
            let resolved = resolve_tool_name(&call.name, tools.iter().map(|t| t.name.as_str()));
            let (tool, args, action) = match resolved {
                // A tool the user asked for that is withheld: not
                // "unknown" but not allowed, as the system prompt said
                // (`named_tool.rs`).
                Err(_) if run.withheld.contains(&call.name) => (
                    call.name.clone(),
                    Value::Null,
                    Action::Reject {
                        message: super::named_tool::withheld_refusal(&call.name),
                        kind: ErrorKind::PermissionDenied,
                    },
                ),
                Err(rejection) => (call.name.clone(), Value::Null, Action::rejected(rejection)),
                Ok(tool) => match parse_arguments(&call.arguments).and_then(|args| {
                    crate::var_ref::substitute(args, &self.opts.vars).map_err(CallRejection::from)
                }) {
                    Err(rejection) => (tool, Value::Null, Action::rejected(rejection)),
                    Ok(args) if within && search && tool == SEARCH_TOOLS => {
                        let action = self.search_tools(run, tools, &args);
                        (tool, args, action)
                    }
                    Ok(args) => {
                        if search && within {
                            // Called by name: offered in full from now on.
                            run.found.insert(tool.clone());
                        }
                        let read_only = tools
                            .iter()
                            .find(|t| t.name == tool)
                            .is_some_and(|t| t.read_only);
                        let action = Action::Run {
                            read_only,
                            builtin: builtin && tool == READ_VAR,
                        };
                        (tool, args, action)
                    }
                },
            };
            if tool != call.name {
                debug!(requested = %call.name, %tool, "tool name repaired");
            }
            self.emit(AgentEvent::ToolCallPending {
                round,
                call_id: call.id.clone(),
                tool: tool.clone(),
                requested_name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            if let Some(s) = &stop {
                let reason = s.error.clone().unwrap_or_else(|| s.status.to_string());
                planned.push(Planned {
                    call,
                    tool,
                    args,
                    action: Action::Skip { reason },
                });
                continue;
            }
            let action = if !within {
                // Past the round's bound: answered, never run, and the
                // loop goes on (the model may ask again next round).
                if index == cap {
                    warn!(round, cap, "more calls in one reply than a round runs");
                }
                Action::Skip {
                    reason: format!(
                        "a round runs at most {cap} calls and this was call {}; ask for it \
                         again in the next round if it is still needed",
                        index.saturating_add(1)
                    ),
                }
            } else if matches!(action, Action::Run { .. })
                && super::answer::echoes_a_result(&run.history, &tool, &args)
            {
                // A call that hands back the last result: the model is done.
                info!(%tool, "the call hands back the last result; the run ends with it");
                run.settled = true;
                stop = Some(Stop {
                    status: Status::Completed,
                    error: None,
                });
                Action::Skip {
                    reason: format!(
                        "the arguments are the result `{tool}` just gave; the run ends with \
                         that result as its answer"
                    ),
                }
            } else {
                match self.check_doom_loop(run, round, &tool, &args, &call).await {
                    Ok(()) => repeated(run, &tool, action, tools),
                    Err(s) => {
                        let reason = s.error.clone().unwrap_or_else(|| s.status.to_string());
                        stop = Some(s);
                        Action::Skip { reason }
                    }
                }
            };
            planned.push(Planned {
                call,
                tool,
                args,
                action,
            });
        }
        (planned, stop)
    }

    /// Answers `search_tools` over the catalog (`tools` without it); what it
    /// finds is offered in full from the next round on.
    fn search_tools(&self, run: &mut RunState, tools: &[ToolSpec], args: &Value) -> Action {
        let catalog: Vec<ToolSpec> = tools
            .iter()
            .filter(|t| t.name != SEARCH_TOOLS)
            .cloned()
            .collect();
        let index = self.search_index.index(catalog.iter().map(tool_text));
        match answer(&index, &catalog, args, &self.opts.tool_search) {
            Ok((output, found)) => {
                debug!(found = ?found, "search_tools");
                run.found.extend(found);
                Action::Searched {
                    output,
                    is_error: false,
                }
            }
            Err(output) => Action::Searched {
                output,
                is_error: true,
            },
        }
    }

    /// Counts identical calls in a row (same tool, same canonical arguments,
    /// across rounds), and cycles of two or three calls repeated as often
    /// (A, B, A, B, A, B: a small model alternating between two tools); at
    /// the threshold asks the approval callback. `Err` when the loop must
    /// stop.
    async fn check_doom_loop(
        &self,
        run: &mut RunState,
        round: u32,
        tool: &str,
        args: &Value,
        call: &ToolCall,
    ) -> Result<(), Stop> {
        let arguments = if args.is_null() {
            call.arguments.trim().to_owned()
        } else {
            canonical_json(args)
        };
        let key = (tool.to_owned(), arguments);
        if run.last_call.as_ref() == Some(&key) {
            run.repeats += 1;
        } else {
            run.last_call = Some(key.clone());
            run.repeats = 1;
        }
        if run.recent.len() >= RECENT_CALLS {
            run.recent.pop_front();
        }
        run.recent.push_back(key.clone());
        let threshold = self.opts.doom_loop_threshold;
        let cycle: Vec<String> = if run.repeats >= threshold {
            vec![key.0.clone()]
        } else {
            match cycle_period(&run.recent, threshold) {
                Some(period) => run
                    .recent
                    .iter()
                    .skip(run.recent.len() - period)
                    .map(|(t, _)| t.clone())
                    .collect(),
                None => return Ok(()),
            }
        };
        let (tool, arguments) = key;
        let repeats = if cycle.len() == 1 {
            run.repeats
        } else {
            threshold
        };
        warn!(%tool, repeats, cycle = cycle.len(), "doom loop detected");
        self.emit(AgentEvent::DoomLoopDetected {
            round,
            tool: tool.clone(),
            arguments: arguments.clone(),
            repeats,
            cycle: cycle.clone(),
        });
        let doom = DoomLoop {
            round,
            tool: tool.clone(),
            arguments,
            repeats,
            cycle: cycle.clone(),
        };
        let approved = match &self.opts.doom_loop_approval {
            None => false,
            Some(ask) => tokio::select! {
                biased;
                s = self.interrupted() => return Err(s),
                ok = ask(doom) => ok,
            },
        };
        if approved {
            info!(%tool, "doom loop approved; going on");
            run.repeats = 0;
            run.recent.clear();
            return Ok(());
        }
        let error = if cycle.len() == 1 {
            format!(
                "`{tool}` was called {repeats} times in a row with the same arguments; \
                 its result is already above: do not call it again, answer with what you have"
            )
        } else {
            let names: Vec<String> = cycle.iter().map(|t| format!("`{t}`")).collect();
            format!(
                "{} were called in turn {repeats} times with the same arguments; \
                 their results are already above: do not call them again, answer with what you have",
                names.join(", then ")
            )
        };
        Err(Stop {
            status: Status::DoomLoop,
            error: Some(error),
        })
    }
}

/// The period (2 or 3) of a cycle of calls that the latest calls repeat
/// `threshold` times in a row (A, B, A, B, A, B for period 2 and threshold
/// 3), or `None`. A "cycle" of one repeated call is the plain doom loop,
/// counted apart; cycles longer than [`RECENT_CALLS`] calls are not seen.
fn cycle_period(recent: &VecDeque<(String, String)>, threshold: u32) -> Option<usize> {
    let threshold = usize::try_from(threshold).ok()?;
    (2usize..=3).find(|&period| {
        let Some(span) = period.checked_mul(threshold) else {
            return false;
        };
        if span > recent.len() {
            return false;
        }
        let tail: Vec<&(String, String)> = recent.iter().skip(recent.len() - span).collect();
        let first = &tail[..period];
        // A true cycle of `period` distinct-enough calls, not a shorter one.
        let shorter = first.iter().all(|c| *c == first[0]);
        !shorter && tail.chunks(period).all(|chunk| chunk == first)
    })
}

/// `action`, or [`Action::Repeat`] when it runs a read-only tool with the
/// same arguments as the call just before it (`run.repeats` counts them),
/// whose result was not an error: the model gets that result again with a
/// note, and nothing runs twice. When the user named tools (`tools`, the
/// callable ones) that no call has used, the note asks for them instead,
/// and the next request requires one (`named_tool.rs`; a small model that
/// repeats a step does not know the next one).
fn repeated(run: &mut RunState, tool: &str, action: Action, tools: &[ToolSpec]) -> Action {
    let read_only = matches!(
        action,
        Action::Run {
            read_only: true,
            builtin: false
        }
    );
    let last = run.history.last().filter(|r| r.tool == tool && !r.is_error);
    let Some(output) = last
        .filter(|_| read_only && run.repeats >= 2)
        .map(|r| r.output.clone())
    else {
        return action;
    };
    let next = if run.named_asks < MAX_NAMED_ASKS && run.named_tools.is_empty() {
        let question = super::answer::question(&run.messages);
        named_not_called(question, tools, &run.history)
    } else {
        Vec::new()
    };
    let then = if next.is_empty() {
        "Use it to answer the user now.".to_owned()
    } else {
        info!(%tool, next = ?next, "a repeated call; requiring a tool the user named next");
        let then = format!(
            "The user asked for {}: call it next, with this result.",
            quoted(&next)
        );
        run.named_tools = next;
        run.named_asks = run.named_asks.saturating_add(1);
        then
    };
    Action::Repeat {
        output: format!(
            "{output}{} `{tool}` call just before; it was not run again. {then}]",
            super::answer::REPEAT_NOTE
        ),
    }
}

impl Action {
    fn rejected(rejection: CallRejection) -> Self {
        Action::Reject {
            message: rejection.to_string(),
            kind: rejection.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(names: &str) -> VecDeque<(String, String)> {
        names
            .chars()
            .map(|c| (c.to_string(), "{}".to_owned()))
            .collect()
    }

    #[test]
    fn a_cycle_is_seen_only_when_repeated_threshold_times_in_a_row() {
        assert_eq!(cycle_period(&calls("ababab"), 3), Some(2));
        assert_eq!(cycle_period(&calls("xababab"), 3), Some(2));
        assert_eq!(cycle_period(&calls("abcabcabc"), 3), Some(3));
        assert_eq!(cycle_period(&calls("abaaba"), 2), Some(3));
        assert_eq!(cycle_period(&calls("ababa"), 3), None, "two and a half");
        assert_eq!(cycle_period(&calls("ababcb"), 3), None);
        assert_eq!(cycle_period(&calls("aaaaaa"), 3), None, "the plain repeat");
        assert_eq!(cycle_period(&calls(""), 3), None);
        assert_eq!(cycle_period(&calls("abab"), u32::MAX), None);
    }

    #[test]
    fn the_same_tool_with_other_arguments_breaks_a_cycle() {
        let mut recent = calls("ababab");
        recent[2].1 = r#"{"x":2}"#.to_owned();
        assert_eq!(cycle_period(&recent, 3), None);
    }
}
