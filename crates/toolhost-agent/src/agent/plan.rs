//! The model's calls checked before they run (state `Execute`, in call
//! order): tool names repaired (against the whole catalog when tool
//! search is on, and `search_tools` answered here), arguments parsed and their variable
//! references substituted, doom loops caught (the same call too many times
//! in a row), and a repeated read-only call answered with the result it just
//! had.

use serde_json::Value;
use tracing::{debug, info, warn};

use super::ctx::{Callable, Ctx};
use super::options::DoomLoop;
use super::state::{Action, Planned, RunState, Stop};
use crate::events::AgentEvent;
use crate::message::ToolCall;
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
        for call in calls {
            let resolved = resolve_tool_name(&call.name, tools.iter().map(|t| t.name.as_str()));
            let (tool, args, action) = match resolved {
                Err(rejection) => (call.name.clone(), Value::Null, Action::rejected(rejection)),
                Ok(tool) => match parse_arguments(&call.arguments).and_then(|args| {
                    crate::var_ref::substitute(args, &self.opts.vars).map_err(CallRejection::from)
                }) {
                    Err(rejection) => (tool, Value::Null, Action::rejected(rejection)),
                    Ok(args) if search && tool == SEARCH_TOOLS => {
                        let action = self.search_tools(run, tools, &args);
                        (tool, args, action)
                    }
                    Ok(args) => {
                        if search {
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
            let action = if matches!(action, Action::Run { .. })
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
                    Ok(()) => repeated(run, &tool, action),
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
    /// across rounds); at the threshold asks the approval callback. `Err` when
    /// the loop must stop.
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
        if run.repeats < self.opts.doom_loop_threshold {
            return Ok(());
        }
        let (tool, arguments) = key;
        let repeats = run.repeats;
        warn!(%tool, repeats, "doom loop detected");
        self.emit(AgentEvent::DoomLoopDetected {
            round,
            tool: tool.clone(),
            arguments: arguments.clone(),
            repeats,
        });
        let doom = DoomLoop {
            round,
            tool: tool.clone(),
            arguments,
            repeats,
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
            return Ok(());
        }
        Err(Stop {
            status: Status::DoomLoop,
            error: Some(format!(
                "`{tool}` was called {repeats} times in a row with the same arguments; \
                 its result is already above: do not call it again, answer with what you have"
            )),
        })
    }
}

/// `action`, or [`Action::Repeat`] when it runs a read-only tool with the
/// same arguments as the call just before it (`run.repeats` counts them),
/// whose result was not an error: the model gets that result again with a
/// note, and nothing runs twice.
fn repeated(run: &RunState, tool: &str, action: Action) -> Action {
    let read_only = matches!(
        action,
        Action::Run {
            read_only: true,
            builtin: false
        }
    );
    let last = run.history.last().filter(|r| r.tool == tool && !r.is_error);
    match last {
        Some(last) if read_only && run.repeats >= 2 => Action::Repeat {
            output: format!(
                "{}\n\n[This is the result of the identical `{tool}` call just before; it was not run \
             again. Use it to answer the user now.]",
                last.output
            ),
        },
        _ => action,
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
