//! The console's HTML, rendered on the server (`maud` escapes every value
//! put into it, so a tool name or an argument cannot become markup), one
//! function per part of the page. The parts the page refreshes live
//! (`/console/part/NAME`) render alone too.

use maud::{DOCTYPE, Markup, html};
use toolhost_runtime::policy::approvals::{SavedApproval, Scope};
use toolhost_runtime::{PluginInfo, Runtime, feed::CallEvent, feed::CallPhase};

use toolhost_runtime::operator::{Asked, Pending, Place};
use toolhost_runtime::tasks::TaskListing;

/// Longest policy file shown.
const MAX_POLICY_BYTES: u64 = 64 * 1024;

/// The whole page.
pub(crate) fn console(view: &View<'_>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="csrf" content=(view.csrf);
                title { "toolhost console" }
                link rel="stylesheet" href="/console/console.css";
                script src="/console/console.js" defer {}
            }
            body {
                header {
                    h1 { "toolhost console" }
                    span.muted { "toolhost " (env!("CARGO_PKG_VERSION")) }
                    button #sign-out type="button" data-post="/console/logout" data-then="reload" { "Sign out" }
                }
                main {
                    (queue(view.queue, view.queue_on, view.queue_trouble))
                    (tasks(view.tasks))
                    (calls(view.calls))
                    (failures(view.failures, view.failures_trouble))
                    (tools(view.runtime))
                    (plugins(&view.runtime.plugins()))
                    (saved(view.runtime))
                    (policy(view.runtime))
                }
            }
        }
    }
}

/// What the page is made from.
pub(crate) struct View<'a> {
    pub(crate) runtime: &'a Runtime,
    pub(crate) csrf: &'a str,
    pub(crate) queue: &'a [Pending],
    /// Whether any `ask` goes to the operator here.
    pub(crate) queue_on: bool,
    /// Why the shared queue cannot be reached, when it cannot.
    pub(crate) queue_trouble: Option<&'a str>,
    pub(crate) calls: &'a [std::sync::Arc<CallEvent>],
    /// The server's tasks (`None`: no call runs as a task).
    pub(crate) tasks: Option<&'a TaskListing>,
    pub(crate) failures: &'a [toolhost_runtime::failures::Failure],
    pub(crate) failures_trouble: Option<&'a str>,
}

/// The sign-in page.
pub(crate) fn sign_in(failed: bool) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "toolhost console: sign in" }
                link rel="stylesheet" href="/console/console.css";
            }
            body {
                main.narrow {
                    h1 { "toolhost console" }
                    p { "Sign in with an operator token (a line with " code { "role=operator" } " in the token file)." }
                    @if failed {
                        p.error #sign-in-error { "That is not an operator token." }
                    }
                    form method="post" action="/console/login" {
                        label for="token" { "Operator token" }
                        input #token type="password" name="token" autocomplete="off" required;
                        button type="submit" { "Sign in" }
                    }
                }
            }
        }
    }
}

/// The approvals queue: the calls waiting here and, when replicas share
/// the queue, on the others (answered from here all the same), and those
/// whose replica is gone (shown, not answerable).
pub(crate) fn queue(pending: &[Pending], on: bool, trouble: Option<&str>) -> Markup {
    html! {
        section #queue {
            h2 { "Approvals waiting" span.count { (pending.len()) } }
            @if let Some(why) = trouble {
                p.trouble { "The shared queue cannot be reached (" (toolhost_text::line(why, 300)) "): only the calls waiting on this replica are shown, and they can be answered here only." }
            }
            @if !on {
                p.muted { "No ask goes to the operator here (ask = \"operator\" on a token, or host serve --asks operator)." }
            } @else if pending.is_empty() {
                p.muted.empty { "Nothing waits for an approval." }
            }
            @for p in pending {
                article.pending data-id=(p.id) data-place=(place_name(p.place)) {
                    h3 {
                        @match p.question.asked {
                            Asked::Call => { "May " code { (p.question.tool) } " run?" }
                            Asked::Result => { "May the result of " code { (p.question.tool) } " go back?" }
                        }
                    }
                    dl {
                        dt { "plugin" } dd { (p.question.plugin) }
                        dt { "arguments" }
                        dd {
                            dl.args {
                                @for a in &p.question.arguments.items {
                                    dt { code { (a.name) } }
                                    dd {
                                        code.value { (a.value) }
                                        @if let Some(whole) = a.cut_from {
                                            span.muted.cut { " (cut: " (whole) " characters in all)" }
                                        }
                                    }
                                }
                                @if p.question.arguments.more > 0 {
                                    dt { "…" } dd.muted.cut { (p.question.arguments.more) " more arguments, not shown" }
                                }
                            }
                        }
                        @if let Some(output) = &p.question.output {
                            dt { "result" } dd { code { (output) } }
                        }
                        @if let Some(client) = &p.question.client {
                            dt { "caller" } dd { (client) }
                        }
                        @if let Some(agent) = &p.question.agent {
                            dt { "profile" } dd { (agent) }
                        }
                        @for r in &p.question.reasons {
                            dt { "why" } dd { (r) }
                        }
                        dt { "denied at" } dd.time data-ms=(p.deadline_ms) { (p.deadline_ms) }
                        @match p.place {
                            Place::Here => {}
                            Place::Elsewhere => { dt { "held" } dd { "by another replica (an answer here reaches it)" } }
                            Place::Gone => { dt { "held" } dd.gone { "by a replica that is gone (stopped, or cut off from the database): it cannot be answered" } }
                        }
                    }
                    @if p.place != Place::Gone {
                    div.actions {
                        button.allow type="button" data-post={ "/console/queue/" (p.id) } data-body="allow" data-then="queue" { "Allow once" }
                        @if p.question.offers_always() {
                            button.allow-always type="button" data-post={ "/console/queue/" (p.id) } data-body="allow-always" data-then="queue" { "Allow these arguments always" }
                        }
                        @if p.question.asked == Asked::Call {
                            @for (i, scope) in p.question.scopes.iter().enumerate() {
                                button.allow-within type="button" data-post={ "/console/queue/" (p.id) } data-body={ "allow-within " (i) } data-then="queue" { "Allow always: " (toolhost_text::line(&scope.to_string(), 200)) }
                            }
                        }
                        button.deny type="button" data-post={ "/console/queue/" (p.id) } data-body="deny" data-then="queue" { "Deny" }
                    }
                    }
                    @if p.question.asked == Asked::Call && !p.question.offers_always() {
                        p.muted.no-always { "Some arguments are too long to show whole, so these arguments cannot be allowed always (nobody would have seen what that approves)." }
                    }
                }
            }
        }
    }
}

fn place_name(place: Place) -> &'static str {
    match place {
        Place::Here => "here",
        Place::Elsewhere => "elsewhere",
        Place::Gone => "gone",
    }
}

/// The calls of late, newest first; the page adds new ones as they happen.
pub(crate) fn calls(recent: &[std::sync::Arc<CallEvent>]) -> Markup {
    html! {
        section #calls {
            h2 { "Live calls" }
            table {
                thead { tr { th { "time" } th { "tool" } th { "caller" } th { "decision" } th { "outcome" } th { "µs" } th { "steps" } } }
                tbody #call-rows {
                    @for c in recent.iter().rev() { (call_row(c)) }
                }
            }
        }
    }
}

fn call_row(c: &CallEvent) -> Markup {
    let who = c
        .client
        .as_deref()
        .or(c.agent.as_deref())
        .unwrap_or("local");
    html! {
        @match &c.phase {
            CallPhase::Started => {
                tr.call.running data-seq=(c.seq) {
                    td.time data-ms=(c.at_ms) { (c.at_ms) } td.tool { (c.tool) } td { (who) }
                    td { "…" } td.outcome { "running" } td { } td { }
                }
            }
            CallPhase::Finished { decision, rule, steps, outcome, micros, cached, .. } => {
                tr.call data-seq=(c.seq) data-outcome=(outcome) {
                    td.time data-ms=(c.at_ms) { (c.at_ms) }
                    td.tool { (c.tool) }
                    td { (who) }
                    td title=(rule.as_deref().unwrap_or_default()) { (decision.as_deref().unwrap_or("-")) }
                    td.outcome { (outcome) @if *cached { " (cached)" } }
                    td.num { (micros) }
                    td.steps {
                        @for s in steps {
                            span.step title=(s.note.as_deref().unwrap_or_default()) { (s.step) " " (s.micros) }
                        }
                    }
                }
            }
        }
    }
}

/// The calls that run as tasks on this server (and, shared, on every
/// replica), newest first (`None`: no call runs as one here), each
/// unfinished one with a button that stops it.
pub(crate) fn tasks(tasks: Option<&TaskListing>) -> Markup {
    html! {
        section #tasks data-on=(if tasks.is_some() { "yes" } else { "no" }) {
            h2 { "Tasks" }
            @if let Some(why) = tasks.and_then(|t| t.trouble.as_deref()) {
                p.trouble { "The other replicas' tasks cannot be read: " (why) ". Only this replica's are shown." }
            }
            @match tasks.map(|t| t.tasks.as_slice()) {
                None => {
                    p.muted { "No call runs as a task here (" code { "[tasks]" } " in the config file names the tools that do)." }
                }
                Some([]) => { p.muted { "None running or kept." } }
                Some(list) => {
                    table {
                        thead { tr { th { "made" } th { "tool" } th { "caller" } th { "state" } th { "status" } th { "replica" } th {} } }
                        tbody {
                            @for t in list {
                                tr.task data-id=(t.id) data-state=(t.state.as_str()) data-replica=(t.replica.as_deref().unwrap_or("here")) {
                                    td.num { (t.age.as_secs()) " s ago" }
                                    td.tool { code { (t.tool) } }
                                    td { (t.owner) }
                                    td.outcome {
                                        (t.state.as_str())
                                        @if t.taken_over { span.muted { " (its replica stopped; run again on another)" } }
                                    }
                                    td { (t.message.as_deref().unwrap_or("")) }
                                    td.muted { (t.replica.as_deref().unwrap_or("here")) }
                                    td {
                                        @if !t.state.is_terminal() {
                                            button type="button" data-post=(format!("/console/tasks/{}/cancel", t.id)) data-then="tasks" { "Stop" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Failed calls of late, this replica's and (shared) the others'; `trouble`
/// says why the others' cannot be read.
pub(crate) fn failures(
    recent: &[toolhost_runtime::failures::Failure],
    trouble: Option<&str>,
) -> Markup {
    html! {
        section #failures {
            h2 { "Recent failures" }
            @if let Some(why) = trouble {
                p.trouble { "The other replicas' failures cannot be read: " (why) ". Only this replica's are shown." }
            }
            @if recent.is_empty() { p.muted { "None since the server started." } }
            ul {
                @for f in recent.iter().rev() {
                    li data-replica=(f.replica.as_deref().unwrap_or("here")) {
                        span.time data-ms=(f.at_ms) { (f.at_ms) } " "
                        code { (f.tool) } ": " strong { (f.outcome) }
                        @if let Some(rule) = &f.rule { span.muted { " (" (rule) ")" } }
                        @if let Some(replica) = &f.replica { span.muted { " on replica " (replica) } }
                    }
                }
            }
        }
    }
}

/// The tools each profile sees (what its policy does not deny outright).
fn tools(runtime: &Runtime) -> Markup {
    let policy = runtime.policy();
    let mut profiles: Vec<Option<&str>> = vec![None];
    profiles.extend(policy.profile_names().into_iter().map(Some));
    html! {
        section #tools {
            h2 { "Tools, as each profile sees them" }
            @for profile in &profiles {
                @let offered = runtime.offered_tools(*profile, None);
                div.profile data-profile=(profile.unwrap_or("")) {
                    h3 { (profile.unwrap_or("(no profile)")) span.count { (offered.len()) } }
                    ul.tools {
                        @for t in &offered {
                            li.tool data-name=(t.name) title=(t.description) {
                                code { (t.name) } span.muted { " " (t.plugin) "@" (t.plugin_version) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Plugins and MCP servers: state, version, digest, requested vs granted,
/// and the lock file's verdict.
fn plugins(plugins: &[PluginInfo]) -> Markup {
    html! {
        section #plugins {
            h2 { "Plugins and MCP servers" }
            table {
                thead { tr { th { "name" } th { "version" } th { "state" } th { "requests" } th { "granted" } th { "lock file" } th { "digest" } } }
                tbody {
                    @for p in plugins {
                        tr.plugin data-name=(p.name) {
                            td { (p.name) }
                            td { (p.version) }
                            td {
                                @if let Some(source) = &p.source {
                                    (source.kind) ": " (source.state)
                                    @if let Some(sign_in) = &source.sign_in { br; (sign_in) }
                                } @else { "loaded" }
                            }
                            td { (p.requested) }
                            td { "dirs=[" (p.granted.dirs.join(", ")) "] hosts=[" (p.granted.hosts.join(", ")) "] env=[" (p.granted.env.join(", ")) "]" }
                            td { (p.grants) }
                            td { code.digest title=(p.digest) { (p.digest.get(..19).unwrap_or(&p.digest)) "…" } }
                        }
                    }
                }
            }
        }
    }
}

/// The saved approvals, each revocable.
pub(crate) fn saved(runtime: &Runtime) -> Markup {
    let all: Result<Vec<SavedApproval>, _> = runtime.approvals().list();
    html! {
        section #saved {
            h2 { "Saved approvals" }
            @match &all {
                Err(e) => { p.error { "The saved approvals cannot be read: " (e) } }
                Ok(all) if all.is_empty() => { p.muted.empty { "None." } }
                Ok(all) => {
                    table {
                        thead { tr { th { "tool" } th { "covers" } th { "by" } th { "from" } th { "caller" } th { "expires" } th { } } }
                        tbody {
                            @for a in all {
                                tr.saved data-id=(a.id) {
                                    td { code { (a.tool) } }
                                    td {
                                        @match &a.scope {
                                            Scope::Arguments(args) => { "these arguments: " code { (toolhost_text::line(&args.to_string(), 300)) } }
                                            scope => { (toolhost_text::line(&scope.to_string(), 300)) }
                                        }
                                    }
                                    td { (a.who) }
                                    td { (a.from) }
                                    td { (toolhost_text::line(&a.binding(), 300)) }
                                    td { @if let Some(e) = a.expires { span.time data-ms=(e.saturating_mul(1000)) { (e) } } @else { "never" } }
                                    td { button.revoke type="button" data-post={ "/console/saved/" (a.id) "/revoke" } data-then="saved" { "Revoke" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The policy in force: its file, as written.
fn policy(runtime: &Runtime) -> Markup {
    let policy = runtime.policy();
    let text = policy.path().map(|p| read_bounded(p, MAX_POLICY_BYTES));
    html! {
        section #policy {
            h2 { "Policy" }
            p { "Default: " strong { (policy.default_decision()) } ". Profiles: "
                @if policy.profile_names().is_empty() { "none" }
                @for (i, name) in policy.profile_names().iter().enumerate() {
                    @if i > 0 { ", " } code { (name) }
                }
            }
            @match (policy.path(), text) {
                (Some(path), Some(Ok(text))) => { p.muted { (path.display()) } pre { (text) } }
                (Some(path), Some(Err(e))) => { p.error { (path.display()) ": " (e) } }
                _ => { p.muted { "No policy file: every tool is allowed." } }
            }
        }
    }
}

fn read_bounded(path: &std::path::Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max)
        .read_to_string(&mut text)?;
    Ok(toolhost_text::block(
        &text,
        usize::try_from(max).unwrap_or(usize::MAX),
    ))
}
