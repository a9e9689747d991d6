//! The approver of a call that runs as a task: each question the call
//! meets (a policy ask, a result approval, an upstream server's form) is
//! an input request of the task, and the call waits for its answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rmcp::model::InputRequest;
use rmcp::task_manager::TaskContext;
use serde_json::Value;
use toolhost_runtime::{
    Approver, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::FormAnswer, permission::FormRequest,
    permission::ResultApproval, permission::ResultApprovalRequest,
};

use super::super::elicit::{approval_answer, approval_request, call_question, result_question};

/// The approver of a call that runs as a task: each question is an input
/// request of the task, and the call waits for its answer.
pub(crate) struct TaskApprover {
    task: TaskContext,
    asked: AtomicU32,
}

impl TaskApprover {
    pub(crate) fn new(task: TaskContext) -> Arc<TaskApprover> {
        Arc::new(TaskApprover {
            task,
            asked: AtomicU32::new(0),
        })
    }

    /// Asks `request` under a key of its own; `None` when the task was
    /// cancelled meanwhile.
    async fn ask(&self, kind: &str, request: InputRequest) -> Option<Value> {
        let n = self.asked.fetch_add(1, Ordering::Relaxed);
        self.task
            .request_input(format!("toolhost-{kind}-{n}"), request)
            .await
            .ok()
    }
}

impl Approver for TaskApprover {
    fn prompt_name(&self) -> &'static str {
        "mcp-task"
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            let question = call_question(request);
            let Ok(input) = approval_request(&question) else {
                return CallApproval::Deny {
                    message: Some("cannot write the question".to_owned()),
                };
            };
            match self.ask("approval", input).await {
                None => CallApproval::Deny {
                    message: Some("the task was cancelled".to_owned()),
                },
                Some(answer) => match approval_answer(&answer) {
                    (true, true) if question.remember => CallApproval::AllowAlways,
                    (true, _) => CallApproval::AllowOnce,
                    (false, _) => CallApproval::Deny {
                        message: Some("the user declined".to_owned()),
                    },
                },
            }
        })
    }

    fn approve_result<'a>(
        &'a self,
        request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move {
            let Ok(input) = approval_request(&result_question(request)) else {
                return ResultApproval::Reject {
                    message: Some("cannot write the question".to_owned()),
                };
            };
            match self.ask("result", input).await {
                Some(answer) if approval_answer(&answer).0 => ResultApproval::Accept,
                Some(_) => ResultApproval::Reject {
                    message: Some("the user declined".to_owned()),
                },
                None => ResultApproval::Reject {
                    message: Some("the task was cancelled".to_owned()),
                },
            }
        })
    }

    fn answer_form<'a>(&'a self, request: &'a FormRequest<'a>) -> ApprovalFuture<'a, FormAnswer> {
        Box::pin(async move {
            let input: Result<InputRequest, _> = serde_json::from_value(serde_json::json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": request.message,
                    "requestedSchema": request.schema,
                },
            }));
            let Ok(input) = input else {
                return FormAnswer::Decline;
            };
            let Some(answer) = self.ask("form", input).await else {
                return FormAnswer::Cancel;
            };
            match answer.get("action").and_then(Value::as_str) {
                Some("accept") => FormAnswer::Accept(
                    answer
                        .get("content")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                ),
                Some("cancel") => FormAnswer::Cancel,
                _ => FormAnswer::Decline,
            }
        })
    }
}
