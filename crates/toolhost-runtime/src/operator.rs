//! The operator's approvals queue: a call whose `ask` goes to the operator
//! (`ask = "operator"`) waits here until someone answers it (in the
//! console, `toolhost-console`), or its time runs out, which denies it.
//!
//! It lives beside the [`Approver`] trait, not in the console, because
//! what routes an `ask` here (the MCP server, the CLI) needs the queue
//! and not the web page; the console only shows and answers it.
//!
//! Where the queue is kept is a [`QueueStore`]: this process's memory by
//! default ([`MemoryQueue`]), or a database that replicas share
//! (`toolhost_state::PostgresQueue`), where an ask held on any replica is
//! listed on every replica's console ([`Place`]) and answered from any of
//! them. The call itself always waits in the process that holds it.
//!
//! Bounded: at most [`QueueSettings::capacity`] calls wait at once; one
//! more is denied at once, saying the queue is full. A call whose caller
//! gives up (an MCP client cancels, a connection drops) leaves the queue.
//! A question shows every argument, each cut on its own
//! ([`ShownArguments`]); when any was cut, "allow these arguments always"
//! is refused ([`QueueError::AlwaysNotOffered`]): nobody saw what it would
//! approve.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use toolhost_runtime::operator::{Answer, OperatorQueue, Question, QueueSettings};
//!
//! let queue = OperatorQueue::new(QueueSettings::default());
//! let waiting = {
//!     let queue = queue.clone();
//!     let args = serde_json::json!({"path": "notes.txt"});
//!     tokio::spawn(async move { queue.ask(Question::call("write_file", "fs", &args)).await })
//! };
//! // The console shows the question; the operator allows it.
//! while queue.pending().is_empty() { tokio::task::yield_now().await; }
//! let id = queue.pending()[0].id;
//! queue.answer(id, Answer::Allow).await.unwrap();
//! assert_eq!(waiting.await.unwrap(), Answer::Allow);
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use toolhost_policy::approvals::Scope;

use crate::permission::{
    ApprovalFuture, Approver, CallApproval, CallApprovalRequest, ResultApproval,
    ResultApprovalRequest,
};
use crate::shown_args::ShownArguments;

mod store;

pub use store::{Inbox, MAX_ASK_BYTES, MemoryQueue, QueueStore, StoreError, StoreFuture};

/// Longest output text kept with a question.
const SHOWN_CHARS: usize = 2000;
/// Most reasons kept with a question, and their length.
const MAX_REASONS: usize = 8;
/// Most scopes offered with a question.
const MAX_SCOPES: usize = 4;

/// How many calls may wait and for how long.
#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    /// Most calls waiting at once (64 by default).
    pub capacity: usize,
    /// How long a call waits for an answer before it is denied (5 minutes
    /// by default, as long as an MCP client's user has to answer).
    pub timeout: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            capacity: 64,
            timeout: Duration::from_secs(300),
        }
    }
}

/// What is asked: may this call run, or may this result go back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Asked {
    /// May the call run.
    Call,
    /// May its result go back to the caller.
    Result,
}

/// One question for the operator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Question {
    /// A call or a result.
    pub asked: Asked,
    /// The tool's exposed name.
    pub tool: String,
    /// The plugin (or MCP server) that provides it.
    pub plugin: String,
    /// The arguments, each shown on its own (see [`ShownArguments`]).
    pub arguments: ShownArguments,
    /// For a result: its text (cut at 2,000 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Why it is asked (the policy rule, the hooks).
    pub reasons: Vec<String>,
    /// The policy profile the call runs under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Who called (a token's digest, never the token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The narrower scopes an approval may be saved for (this directory,
    /// this host), as the runtime offered them; [`Answer::AllowWithin`]
    /// names one by its place here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<Scope>,
}

impl Question {
    /// May `tool` of `plugin` run with `args`?
    pub fn call(tool: &str, plugin: &str, args: &Value) -> Question {
        Question {
            asked: Asked::Call,
            tool: toolhost_text::line(tool, 200),
            plugin: toolhost_text::line(plugin, 200),
            arguments: ShownArguments::of(args),
            output: None,
            reasons: Vec::new(),
            agent: None,
            client: None,
            scopes: Vec::new(),
        }
    }

    /// The question a runtime's call approval request asks.
    pub fn of_call(request: &CallApprovalRequest<'_>) -> Question {
        let mut q = Question::call(request.tool, request.plugin, request.args);
        q.reasons = bounded_reasons(request.reasons);
        q.agent = request.agent.map(|a| toolhost_text::line(a, 200));
        q.scopes = request.scopes.iter().take(MAX_SCOPES).cloned().collect();
        q
    }

    /// The question a runtime's result approval request asks.
    pub fn of_result(request: &ResultApprovalRequest<'_>) -> Question {
        let mut q = Question::call(request.tool, request.plugin, request.args);
        q.asked = Asked::Result;
        q.output = Some(toolhost_text::line(request.output, SHOWN_CHARS));
        q
    }

    /// Whether "allow these arguments always" may be given: a call's
    /// question whose every argument is shown whole.
    pub fn offers_always(&self) -> bool {
        self.asked == Asked::Call && self.arguments.complete()
    }

    /// The same question bounded and made safe again, as it is when
    /// made: for a question read back from elsewhere (a shared queue's
    /// database), which is outside input.
    #[must_use]
    pub fn bounded(self) -> Question {
        Question {
            asked: self.asked,
            tool: toolhost_text::line(&self.tool, 200),
            plugin: toolhost_text::line(&self.plugin, 200),
            arguments: self.arguments.bounded(),
            output: self.output.map(|o| toolhost_text::line(&o, SHOWN_CHARS)),
            reasons: bounded_reasons(&self.reasons),
            agent: self.agent.map(|a| toolhost_text::line(&a, 200)),
            client: self.client.map(|c| toolhost_text::line(&c, 200)),
            scopes: self.scopes.into_iter().take(MAX_SCOPES).collect(),
        }
    }

    /// The same question, from `client`.
    #[must_use]
    pub fn from_client(mut self, client: Option<&str>) -> Question {
        self.client = client.map(|c| toolhost_text::line(c, 200));
        self
    }
}

fn bounded_reasons(reasons: &[String]) -> Vec<String> {
    reasons
        .iter()
        .take(MAX_REASONS)
        .map(|r| toolhost_text::line(r, 300))
        .collect()
}

/// The operator's answer (kept as JSON by a shared queue:
/// `"allow"`, `{"allow-within": 0}`, `{"deny": "why"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// Run it (or return the result) this once.
    Allow,
    /// Run it, and save an approval for these exact arguments.
    AllowAlways,
    /// Run it, and save an approval for the question's scope at this place
    /// in [`Question::scopes`] (this directory, this host).
    AllowWithin(usize),
    /// Do not; the text says why (to the caller).
    Deny(String),
}

impl Answer {
    /// The answer a page posts: `allow`, `allow-always`, `allow-within N`
    /// (the question's scope at place N) or `deny`; `None` for anything
    /// else.
    pub fn parse(body: &str) -> Option<Answer> {
        match body.trim() {
            "allow" => Some(Answer::Allow),
            "allow-always" => Some(Answer::AllowAlways),
            "deny" => Some(Answer::Deny("the operator denied it".to_owned())),
            other => other
                .strip_prefix("allow-within ")
                .and_then(|n| n.trim().parse().ok())
                .map(Answer::AllowWithin),
        }
    }
}

/// Where a waiting question is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Place {
    /// In this process: its call waits here.
    #[default]
    Here,
    /// On another replica sharing the queue, which renews its hold: an
    /// answer given here reaches it.
    Elsewhere,
    /// On a replica that stopped renewing its hold (it stopped, or lost
    /// the database): it cannot be answered from here.
    Gone,
}

/// A question waiting in the queue, as the console lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    /// Its number, the same on every replica (the console's buttons name
    /// it).
    pub id: u64,
    /// Where it is held (not kept: each replica sees it from its side).
    #[serde(skip)]
    pub place: Place,
    /// What is asked.
    #[serde(flatten)]
    pub question: Question,
    /// When it was asked (Unix ms).
    pub asked_at_ms: u64,
    /// When it is denied if nobody answers (Unix ms).
    pub deadline_ms: u64,
}

/// Why an answer did not reach a question.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// No such question waits (answered already, timed out, or its caller
    /// gave up).
    #[error("no question {0} is waiting (answered, timed out, or its caller gave up)")]
    NotWaiting(u64),
    /// "Allow always" for a question that does not offer it (its
    /// arguments were cut, or it asks about a result); the question still
    /// waits.
    #[error(
        "question {0} does not offer \"allow these arguments always\" (an argument too long to show whole, or a result); it still waits"
    )]
    AlwaysNotOffered(u64),
    /// The question is held by a replica that stopped renewing its hold
    /// (it stopped, or lost the database): nothing would reach its call.
    #[error(
        "question {0} is held by a replica that is gone (stopped, or cut off from the database); its call cannot be answered from here"
    )]
    Gone(u64),
    /// The question is not held here, and the shared queue that would
    /// reach its replica cannot be reached.
    #[error("question {0} is not held by this replica, and the shared queue is not reachable: {1}")]
    Unreachable(u64, String),
}

struct Waiting {
    pending: Pending,
    reply: oneshot::Sender<Answer>,
}

struct Inner {
    settings: QueueSettings,
    waiting: Mutex<BTreeMap<u64, Waiting>>,
    next: AtomicU64,
    changed: broadcast::Sender<()>,
    store: Arc<dyn QueueStore>,
}

/// The approvals queue (see the module docs). Cheap to clone; every clone
/// is the same queue.
#[derive(Clone)]
pub struct OperatorQueue {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OperatorQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorQueue")
            .field("waiting", &self.inner.waiting.lock().len())
            .finish_non_exhaustive()
    }
}

/// Removes a question from the queue when its caller stops waiting.
struct Leave<'a> {
    queue: &'a OperatorQueue,
    id: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if self.queue.inner.waiting.lock().remove(&self.id).is_some() {
            self.queue.inner.store.release(self.id);
            self.queue.changed();
        }
    }
}

impl OperatorQueue {
    /// An empty queue in this process only ([`MemoryQueue`]).
    pub fn new(settings: QueueSettings) -> OperatorQueue {
        OperatorQueue::with_store(settings, Arc::new(MemoryQueue))
    }

    /// An empty queue kept in `store` (e.g. a database that replicas
    /// share). A store serves one queue.
    pub fn with_store(settings: QueueSettings, store: Arc<dyn QueueStore>) -> OperatorQueue {
        let inner = Arc::new(Inner {
            settings: QueueSettings {
                capacity: settings.capacity.max(1),
                timeout: settings.timeout,
            },
            waiting: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(store.first_id()),
            changed: broadcast::channel(64).0,
            store,
        });
        inner.store.attach(Inbox {
            queue: Arc::downgrade(&inner),
        });
        OperatorQueue { inner }
    }

    /// Why the shared queue cannot be reached now, if it cannot: then
    /// this replica lists only its own asks, and answers them here only.
    pub fn trouble(&self) -> Option<String> {
        self.inner.store.trouble()
    }

    /// How long a question waits before it is denied.
    pub fn timeout(&self) -> Duration {
        self.inner.settings.timeout
    }

    /// Asks the operator; waits for the answer, or denies when the queue is
    /// full or the time runs out. Dropping the future takes the question
    /// back.
    pub async fn ask(&self, question: Question) -> Answer {
        let (reply, answer) = oneshot::channel();
        let now = unix_ms();
        let timeout = self.inner.settings.timeout;
        let until = tokio::time::Instant::now() + timeout;
        let id = {
            let mut waiting = self.inner.waiting.lock();
            if waiting.len() >= self.inner.settings.capacity {
                return Answer::Deny(format!(
                    "the operator's approvals queue is full ({} calls wait); try again later",
                    self.inner.settings.capacity
                ));
            }
            let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
            let deadline =
                now.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
            waiting.insert(
                id,
                Waiting {
                    pending: Pending {
                        id,
                        place: Place::Here,
                        question,
                        asked_at_ms: now,
                        deadline_ms: deadline,
                    },
                    reply,
                },
            );
            id
        };
        let _leave = Leave { queue: self, id };
        self.changed();
        tracing::info!(id, "a call waits for the operator's approval");
        // Shown to the other replicas: a shared queue that is full denies
        // it; one out of reach leaves it waiting here, answerable here. An
        // answer given here meanwhile is not kept waiting on the store.
        let held = self
            .inner
            .waiting
            .lock()
            .get(&id)
            .map(|w| w.pending.clone());
        let answer = async move {
            tokio::pin!(answer);
            if let Some(pending) = held {
                tokio::select! {
                    biased;
                    answered = &mut answer => return answered,
                    shown = self.inner.store.hold(&pending) => match shown {
                        Ok(()) => {}
                        Err(full @ StoreError::Full(_)) => return Ok(Answer::Deny(full.to_string())),
                        Err(e) => tracing::warn!(id, "the ask waits on this replica only: {e}"),
                    },
                }
            }
            answer.await
        };
        match tokio::time::timeout_at(until, answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Answer::Deny("the operator's queue was closed".to_owned()),
            Err(_) => Answer::Deny(format!(
                "no operator answered within {} s",
                timeout.as_secs()
            )),
        }
    }

    /// The questions waiting, here and (with a shared store) on the other
    /// replicas, oldest first.
    pub fn pending(&self) -> Vec<Pending> {
        let mut all: Vec<Pending> = self
            .inner
            .waiting
            .lock()
            .values()
            .map(|w| w.pending.clone())
            .collect();
        let here: std::collections::BTreeSet<u64> = all.iter().map(|p| p.id).collect();
        all.extend(
            self.inner
                .store
                .elsewhere()
                .into_iter()
                .filter(|p| !here.contains(&p.id)),
        );
        all.sort_by_key(|p| (p.asked_at_ms, p.id));
        all
    }

    /// Answers question `id`, held here or (with a shared store) on
    /// another replica. "Allow always" is refused for a question that
    /// does not [offer it](Question::offers_always).
    pub async fn answer(&self, id: u64, answer: Answer) -> Result<(), QueueError> {
        match deliver(&self.inner, id, answer.clone()) {
            Err(QueueError::NotWaiting(_)) => {
                self.inner.store.answer(id, &answer).await?;
                tracing::info!(
                    id,
                    ?answer,
                    "the operator answered a call held by another replica"
                );
                Ok(())
            }
            done => done,
        }
    }

    /// A signal each time a question is added or leaves (for the
    /// console's live view).
    pub fn changes(&self) -> broadcast::Receiver<()> {
        self.inner.changed.subscribe()
    }

    fn changed(&self) {
        // Nobody listening is fine.
        let _ = self.inner.changed.send(());
    }
}

/// How often a waiting caller is reminded that it still waits
/// ([`QueueApprover::on_wait`]).
pub const REMIND_EVERY: Duration = Duration::from_secs(10);

/// A note on what a waiting call waits for (`on_wait`'s argument).
type OnWait = Box<dyn Fn(&str) + Send + Sync>;

/// The queue as a runtime's [`Approver`], for one caller: made by
/// [`OperatorQueue::approver`].
pub struct QueueApprover {
    queue: OperatorQueue,
    client: Option<String>,
    on_wait: Option<OnWait>,
}

impl OperatorQueue {
    /// The queue as an approver a runtime (or a call's context) is given.
    ///
    /// ```
    /// use toolhost_runtime::operator::{OperatorQueue, QueueSettings};
    /// let queue = OperatorQueue::new(QueueSettings::default());
    /// let approver = queue.approver().client(Some("token:1234".into()));
    /// # let _ = approver;
    /// ```
    pub fn approver(&self) -> QueueApprover {
        QueueApprover {
            queue: self.clone(),
            client: None,
            on_wait: None,
        }
    }
}

impl QueueApprover {
    /// Names the caller to the operator (a token's digest, never the token).
    #[must_use]
    pub fn client(mut self, client: Option<String>) -> Self {
        self.client = client;
        self
    }

    /// Tells the caller that its call waits: at once, then every
    /// [`REMIND_EVERY`] (so its own timeout does not fire first); the MCP
    /// server sends these as `notifications/progress`.
    #[must_use]
    pub fn on_wait(mut self, tell: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_wait = Some(Box::new(tell));
        self
    }

    async fn wait(&self, question: Question) -> Answer {
        let note = format!(
            "waiting for the operator's approval of `{}` (denied after {} s without an answer)",
            question.tool,
            self.queue.timeout().as_secs()
        );
        let asked = self.queue.ask(question.from_client(self.client.as_deref()));
        tokio::pin!(asked);
        loop {
            if let Some(tell) = &self.on_wait {
                tell(&note);
            }
            tokio::select! {
                answer = &mut asked => return answer,
                () = tokio::time::sleep(REMIND_EVERY) => {}
            }
        }
    }
}

impl Approver for QueueApprover {
    fn prompt_name(&self) -> &'static str {
        "operator-console"
    }

    fn who(&self) -> Option<String> {
        Some("operator".to_owned())
    }

    fn answers_everyone(&self) -> bool {
        true
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            match self.wait(Question::of_call(request)).await {
                Answer::Allow => CallApproval::AllowOnce,
                Answer::AllowAlways => CallApproval::AllowAlways,
                // The scope the runtime offered at that place; a place it
                // did not offer approves this call only.
                Answer::AllowWithin(i) => request
                    .scopes
                    .get(i)
                    .cloned()
                    .map_or(CallApproval::AllowOnce, CallApproval::AllowWithin),
                Answer::Deny(why) => CallApproval::Deny { message: Some(why) },
            }
        })
    }

    fn approve_result<'a>(
        &'a self,
        request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move {
            match self.wait(Question::of_result(request)).await {
                Answer::Allow | Answer::AllowAlways | Answer::AllowWithin(_) => {
                    ResultApproval::Accept
                }
                Answer::Deny(why) => ResultApproval::Reject { message: Some(why) },
            }
        })
    }
}

/// Gives `answer` to question `id` held here, and takes it out of the
/// queue (and the store).
fn deliver(inner: &Inner, id: u64, answer: Answer) -> Result<(), QueueError> {
    let waiting = {
        let mut waiting = inner.waiting.lock();
        let question = &waiting
            .get(&id)
            .ok_or(QueueError::NotWaiting(id))?
            .pending
            .question;
        if answer == Answer::AllowAlways && !question.offers_always() {
            return Err(QueueError::AlwaysNotOffered(id));
        }
        waiting.remove(&id).ok_or(QueueError::NotWaiting(id))?
    };
    tracing::info!(id, ?answer, "the operator answered");
    // The answer first, then the store's release: a call that has not yet
    // shown its ask to the store finds its answer and never shows it (it
    // would otherwise show it after the release, and the ask would stay
    // listed on every replica with no call behind it).
    let sent = waiting
        .reply
        .send(answer)
        .map_err(|_| QueueError::NotWaiting(id));
    inner.store.release(id);
    let _ = inner.changed.send(());
    sent
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn until_pending(queue: &OperatorQueue, n: usize) {
        while queue.pending().len() < n {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn an_unanswered_question_is_denied_when_its_time_runs_out() {
        let queue = OperatorQueue::new(QueueSettings {
            capacity: 4,
            timeout: Duration::from_millis(50),
        });
        let answer = queue
            .ask(Question::call("t", "p", &serde_json::json!({})))
            .await;
        assert!(matches!(answer, Answer::Deny(why) if why.contains("no operator answered")));
        assert!(queue.pending().is_empty(), "it left the queue");
    }

    #[tokio::test]
    async fn a_full_queue_denies_at_once_and_keeps_the_waiting_ones() {
        let queue = OperatorQueue::new(QueueSettings {
            capacity: 1,
            timeout: Duration::from_secs(60),
        });
        let first = tokio::spawn({
            let queue = queue.clone();
            async move {
                queue
                    .ask(Question::call("a", "p", &serde_json::json!({})))
                    .await
            }
        });
        until_pending(&queue, 1).await;
        let second = queue
            .ask(Question::call("b", "p", &serde_json::json!({})))
            .await;
        assert!(matches!(second, Answer::Deny(why) if why.contains("full")));
        let id = queue.pending()[0].id;
        queue.answer(id, Answer::AllowAlways).await.unwrap();
        assert_eq!(first.await.unwrap(), Answer::AllowAlways);
        assert_eq!(
            queue.answer(id, Answer::Allow).await,
            Err(QueueError::NotWaiting(id))
        );
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_leaves_the_queue() {
        let queue = OperatorQueue::new(QueueSettings::default());
        let mut changes = queue.changes();
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move {
                queue
                    .ask(Question::call("a", "p", &serde_json::json!({})))
                    .await
            }
        });
        until_pending(&queue, 1).await;
        waiting.abort();
        let _ = waiting.await;
        assert!(queue.pending().is_empty());
        assert!(changes.try_recv().is_ok(), "the console hears of it");
    }

    #[tokio::test]
    async fn the_approver_tells_the_caller_it_waits_names_it_and_maps_the_answer() {
        let queue = OperatorQueue::new(QueueSettings::default());
        let told = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let approver = {
            let told = told.clone();
            queue
                .approver()
                .client(Some("token:abcd".into()))
                .on_wait(move |note| {
                    assert!(note.contains("waiting for the operator"), "{note}");
                    told.fetch_add(1, Ordering::Relaxed);
                })
        };
        assert_eq!(approver.who().as_deref(), Some("operator"));
        let waiting = tokio::spawn(async move {
            let args = serde_json::json!({"expression": "6*7"});
            let request = CallApprovalRequest {
                tool: "calculate",
                plugin: "calc",
                digest: "sha256:test",
                args: &args,
                reasons: &[],
                session_id: None,
                agent: None,
                scopes: &[],
            };
            approver.approve_call(&request).await
        });
        until_pending(&queue, 1).await;
        let pending = queue.pending();
        assert_eq!(pending[0].question.client.as_deref(), Some("token:abcd"));
        queue
            .answer(pending[0].id, Answer::AllowAlways)
            .await
            .unwrap();
        assert_eq!(waiting.await.unwrap(), CallApproval::AllowAlways);
        assert!(told.load(Ordering::Relaxed) >= 1);
    }

    #[tokio::test]
    async fn an_operators_answer_within_a_scope_is_the_scope_the_runtime_offered() {
        let queue = OperatorQueue::new(QueueSettings::default());
        let offered = vec![Scope::Directory {
            argument: "/path".into(),
            directory: "/srv/notes".into(),
        }];
        for (place, expected) in [
            (0, CallApproval::AllowWithin(offered[0].clone())),
            // A place the runtime did not offer approves this call only.
            (7, CallApproval::AllowOnce),
        ] {
            let approver = queue.approver();
            let scopes = offered.clone();
            let waiting = tokio::spawn(async move {
                let args = serde_json::json!({"path": "a.txt"});
                let request = CallApprovalRequest {
                    tool: "read_file",
                    plugin: "fs",
                    digest: "sha256:test",
                    args: &args,
                    reasons: &[],
                    session_id: None,
                    agent: None,
                    scopes: &scopes,
                };
                approver.approve_call(&request).await
            });
            until_pending(&queue, 1).await;
            let pending = queue.pending();
            assert_eq!(pending[0].question.scopes, offered);
            queue
                .answer(pending[0].id, Answer::AllowWithin(place))
                .await
                .unwrap();
            assert_eq!(waiting.await.unwrap(), expected);
        }
    }

    #[test]
    fn a_posted_answer_parses_and_anything_else_is_refused() {
        assert_eq!(Answer::parse("allow\n"), Some(Answer::Allow));
        assert_eq!(Answer::parse("allow-always"), Some(Answer::AllowAlways));
        assert_eq!(
            Answer::parse("allow-within 1"),
            Some(Answer::AllowWithin(1))
        );
        assert!(matches!(Answer::parse("deny"), Some(Answer::Deny(_))));
        for bad in [
            "",
            "allow-within",
            "allow-within -1",
            "allow-within x",
            "yes",
        ] {
            assert_eq!(Answer::parse(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn allow_always_is_refused_for_arguments_that_were_cut_and_the_question_waits_on() {
        let queue = OperatorQueue::new(QueueSettings::default());
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move {
                let args = serde_json::json!({"content": "x".repeat(10_000), "path": "a.txt"});
                queue.ask(Question::call("write_file", "fs", &args)).await
            }
        });
        until_pending(&queue, 1).await;
        let pending = &queue.pending()[0];
        assert!(!pending.question.offers_always());
        assert_eq!(
            pending.question.arguments.items[1].value, "\"a.txt\"",
            "the path is shown whole"
        );
        assert_eq!(
            queue.answer(pending.id, Answer::AllowAlways).await,
            Err(QueueError::AlwaysNotOffered(pending.id))
        );
        queue.answer(pending.id, Answer::Allow).await.unwrap();
        assert_eq!(waiting.await.unwrap(), Answer::Allow);
    }

    /// A store that shares with nobody but records what it is told, and
    /// lists one ask from "elsewhere".
    #[derive(Debug, Default)]
    struct Recording {
        inbox: Mutex<Option<Inbox>>,
        held: Mutex<Vec<u64>>,
        released: Mutex<Vec<u64>>,
        answered: Mutex<Vec<(u64, Answer)>>,
        full: bool,
    }

    impl QueueStore for Recording {
        fn describe(&self) -> String {
            "a recording".into()
        }
        fn first_id(&self) -> u64 {
            7 << 32
        }
        fn attach(&self, inbox: Inbox) {
            *self.inbox.lock() = Some(inbox);
        }
        fn hold<'a>(&'a self, ask: &'a Pending) -> StoreFuture<'a, Result<(), StoreError>> {
            Box::pin(async move {
                if self.full {
                    return Err(StoreError::Full(1));
                }
                self.held.lock().push(ask.id);
                Ok(())
            })
        }
        fn release(&self, id: u64) {
            self.released.lock().push(id);
        }
        fn elsewhere(&self) -> Vec<Pending> {
            vec![Pending {
                id: 3 << 32,
                place: Place::Gone,
                question: Question::call("far", "p", &serde_json::json!({})),
                asked_at_ms: 0,
                deadline_ms: 0,
            }]
        }
        fn answer<'a>(
            &'a self,
            id: u64,
            answer: &'a Answer,
        ) -> StoreFuture<'a, Result<(), QueueError>> {
            Box::pin(async move {
                self.answered.lock().push((id, answer.clone()));
                Ok(())
            })
        }
        fn trouble(&self) -> Option<String> {
            None
        }
    }

    #[tokio::test]
    async fn a_shared_store_is_told_of_each_ask_lists_the_others_and_delivers_their_answers() {
        let store = Arc::new(Recording::default());
        let queue = OperatorQueue::with_store(QueueSettings::default(), store.clone());
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move {
                queue
                    .ask(Question::call("a", "p", &serde_json::json!({})))
                    .await
            }
        });
        until_pending(&queue, 2).await;
        let pending = queue.pending();
        assert_eq!(
            pending[0].place,
            Place::Gone,
            "oldest first, from elsewhere"
        );
        let here = pending[1].id;
        assert_eq!(here, 7 << 32, "numbered from the store's range");
        while store.held.lock().is_empty() {
            tokio::task::yield_now().await;
        }
        // An answer to an ask held elsewhere goes to the store.
        queue.answer(3 << 32, Answer::Allow).await.unwrap();
        assert_eq!(store.answered.lock()[0], (3 << 32, Answer::Allow));
        // An answer given elsewhere arrives through the inbox, with the
        // same checks, and takes the ask back from the store.
        let inbox = store.inbox.lock().clone().unwrap();
        inbox.answer(here, Answer::Deny("no".into())).unwrap();
        assert_eq!(waiting.await.unwrap(), Answer::Deny("no".into()));
        assert_eq!(*store.released.lock(), [here]);
        assert_eq!(
            inbox.answer(here, Answer::Allow),
            Err(QueueError::NotWaiting(here))
        );
    }

    #[tokio::test]
    async fn a_full_shared_store_denies_at_once() {
        let store = Arc::new(Recording {
            full: true,
            ..Recording::default()
        });
        let queue = OperatorQueue::with_store(QueueSettings::default(), store);
        let answer = queue
            .ask(Question::call("a", "p", &serde_json::json!({})))
            .await;
        assert!(
            matches!(&answer, Answer::Deny(why) if why.contains("across the replicas")),
            "{answer:?}"
        );
        assert_eq!(queue.pending().len(), 1, "only the one from elsewhere");
    }

    #[test]
    fn long_arguments_and_many_reasons_are_cut() {
        let args = serde_json::json!({"text": "x".repeat(100_000)});
        let reasons: Vec<String> = (0..100).map(|i| format!("reason {i}")).collect();
        let q = Question::of_call(&CallApprovalRequest {
            tool: "t",
            plugin: "p",
            digest: "sha256:test",
            args: &args,
            reasons: &reasons,
            session_id: None,
            agent: None,
            scopes: &[],
        });
        assert!(q.arguments.items[0].value.chars().count() <= SHOWN_CHARS + 1);
        assert!(!q.offers_always());
        assert_eq!(q.reasons.len(), MAX_REASONS);
    }
}
