//! An `ask` sent to the operator (`ask = "operator"` on a token, or
//! `host serve --asks operator`): the call waits in the console's approvals
//! queue (`toolhost-console`) with its caller named, and the caller hears
//! that it waits through `notifications/progress` (when it sent a progress
//! token), again every [`REMIND_EVERY`] so its own timeout does not fire
//! first.

use std::time::Duration;

use tokio::sync::mpsc;
use toolhost_console::{OperatorQueue, Question, call_answer, result_answer};
use toolhost_runtime::{
    ApprovalFuture, Approver, CallApproval, CallApprovalRequest, ResultApproval,
    ResultApprovalRequest,
};

/// How often a waiting caller is told it still waits.
pub(crate) const REMIND_EVERY: Duration = Duration::from_secs(10);

/// The operator's queue, for one caller's call.
pub(crate) struct OperatorApprover {
    pub(crate) queue: OperatorQueue,
    /// Who calls (a token's digest), shown to the operator.
    pub(crate) client: Option<String>,
    /// The call's progress channel to its caller, if it asked for progress.
    pub(crate) progress: Option<mpsc::Sender<(String, Option<f32>)>>,
}

impl OperatorApprover {
    async fn wait(&self, question: Question) -> toolhost_console::Answer {
        let note = format!(
            "waiting for the operator's approval of `{}` (denied after {} s without an answer)",
            question.tool,
            self.queue.timeout().as_secs()
        );
        let asked = self.queue.ask(question.from_client(self.client.as_deref()));
        tokio::pin!(asked);
        loop {
            if let Some(progress) = &self.progress {
                // Full: this reminder is dropped, the next one goes.
                let _ = progress.try_send((note.clone(), None));
            }
            tokio::select! {
                answer = &mut asked => return answer,
                () = tokio::time::sleep(REMIND_EVERY) => {}
            }
        }
    }
}

impl Approver for OperatorApprover {
    fn prompt_name(&self) -> &'static str {
        "operator-console"
    }

    fn who(&self) -> Option<String> {
        Some("operator".to_owned())
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move { call_answer(self.wait(Question::of_call(request)).await) })
    }

    fn approve_result<'a>(
        &'a self,
        request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move { result_answer(self.wait(Question::of_result(request)).await) })
    }
}
