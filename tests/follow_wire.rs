//! Submit once, then follow, over loopback against a scripted scheduler: a task that
//! takes five status polls to finish with one poll failing `UNAVAILABLE`; a cancel
//! midway that sends `CancelTask` once; a slow submit whose answer is lost followed by
//! status, never re-sent; a lost submit the scheduler never saw; a budget that runs
//! out.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sw4rm_timeouts::follow::{CancelSent, Follow, FollowError, SchedulerTask};
use sw4rm_timeouts::proto::sw4rm::scheduler::scheduler_service_server::{
    SchedulerService, SchedulerServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::scheduler::{
    CancelTaskRequest, CancelTaskResponse, GetTaskStatusRequest, GetTaskStatusResponse,
    PollActivityBufferRequest, PollActivityBufferResponse, PreemptRequest, PreemptResponse,
    PurgeActivityRequest, PurgeActivityResponse, ShutdownAgentRequest, ShutdownAgentResponse,
    SubmitTaskRequest, SubmitTaskResponse, TaskState,
};
use sw4rm_timeouts::{CallEffect, CancelReason, OperationBudget, Sw4rm, TimeoutProfileLayer};
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};

/// What the scheduler answers each status poll of a task, in turn (then the last
/// one again).
type Answers = VecDeque<Result<TaskState, Code>>;

#[derive(Default)]
struct Book {
    tasks: HashMap<String, Answers>,
    submits: usize,
    polls: usize,
    cancels: usize,
}

/// A scheduler answering from a script; `loses_submit`: the submit arrives and is
/// lost (never registered).
struct Scheduler {
    book: Arc<Mutex<Book>>,
    script: Answers,
    submit_latency: Duration,
    loses_submit: bool,
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl SchedulerService for Scheduler {
    async fn submit_task(
        &self,
        r: Request<SubmitTaskRequest>,
    ) -> Result<Response<SubmitTaskResponse>, Status> {
        let id = r.into_inner().task_id;
        self.book.lock().unwrap().submits += 1;
        let register = || {
            self.book
                .lock()
                .unwrap()
                .tasks
                .insert(id.clone(), self.script.clone());
        };
        if !self.loses_submit {
            register();
        }
        tokio::time::sleep(self.submit_latency).await;
        Ok(Response::new(SubmitTaskResponse {
            accepted: true,
            reason: String::new(),
        }))
    }

    async fn get_task_status(
        &self,
        r: Request<GetTaskStatusRequest>,
    ) -> Result<Response<GetTaskStatusResponse>, Status> {
        let id = r.into_inner().task_id;
        let mut book = self.book.lock().unwrap();
        book.polls += 1;
        let Some(answers) = book.tasks.get_mut(&id) else {
            return Err(Status::not_found(format!("no task {id}")));
        };
        let answer = match answers.len() {
            0 => Ok(TaskState::TaskSucceeded),
            1 => answers[0],
            _ => answers.pop_front().unwrap(),
        };
        match answer {
            Ok(state) => Ok(Response::new(GetTaskStatusResponse {
                task_id: id,
                state: state.into(),
                ..GetTaskStatusResponse::default()
            })),
            Err(code) => Err(Status::new(code, "scripted")),
        }
    }

    async fn cancel_task(
        &self,
        r: Request<CancelTaskRequest>,
    ) -> Result<Response<CancelTaskResponse>, Status> {
        let id = r.into_inner().task_id;
        let mut book = self.book.lock().unwrap();
        book.cancels += 1;
        let known = book
            .tasks
            .insert(id, [Ok(TaskState::TaskCancelled)].into())
            .is_some();
        Ok(Response::new(CancelTaskResponse {
            cancelled: known,
            reason: String::new(),
        }))
    }

    async fn request_preemption(
        &self,
        _: Request<PreemptRequest>,
    ) -> Result<Response<PreemptResponse>, Status> {
        unimplemented()
    }
    async fn shutdown_agent(
        &self,
        _: Request<ShutdownAgentRequest>,
    ) -> Result<Response<ShutdownAgentResponse>, Status> {
        unimplemented()
    }
    async fn poll_activity_buffer(
        &self,
        _: Request<PollActivityBufferRequest>,
    ) -> Result<Response<PollActivityBufferResponse>, Status> {
        unimplemented()
    }
    async fn purge_activity(
        &self,
        _: Request<PurgeActivityRequest>,
    ) -> Result<Response<PurgeActivityResponse>, Status> {
        unimplemented()
    }
}

async fn scheduler(
    script: Answers,
    submit_latency: Duration,
    loses_submit: bool,
) -> (Sw4rm, Arc<Mutex<Book>>) {
    scheduler_with(
        script,
        submit_latency,
        loses_submit,
        TimeoutProfileLayer::standard(),
    )
    .await
}

async fn scheduler_with(
    script: Answers,
    submit_latency: Duration,
    loses_submit: bool,
    layer: TimeoutProfileLayer,
) -> (Sw4rm, Arc<Mutex<Book>>) {
    let book = Arc::new(Mutex::new(Book::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let service = Scheduler {
        book: book.clone(),
        script,
        submit_latency,
        loses_submit,
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(SchedulerServiceServer::new(service))
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    let client = Sw4rm::connect_with(url, layer).await.unwrap();
    (client, book)
}

fn task(client: Sw4rm) -> SchedulerTask {
    SchedulerTask::new(
        client,
        SubmitTaskRequest {
            task_id: "t-1".into(),
            ..SubmitTaskRequest::default()
        },
    )
}

fn quick() -> Follow {
    Follow::new()
        .poll_every(Duration::from_millis(20))
        .poll_backoff(1.0, Duration::from_millis(20))
}

use TaskState::{TaskRunning as Running, TaskSucceeded as Succeeded};

#[tokio::test]
async fn five_polls_one_failing_then_the_task_succeeds() {
    let script = [
        Ok(Running),
        Ok(Running),
        Err(Code::Unavailable),
        Ok(Running),
        Ok(Running),
        Ok(Succeeded),
    ];
    // The layer's own retries off, so the helper meets the failed poll itself.
    let layer = TimeoutProfileLayer::standard().without_retries();
    let (client, book) = scheduler_with(script.into(), Duration::ZERO, false, layer).await;
    let done = quick().run(&mut task(client)).await.unwrap();
    assert_eq!(done.status.state(), Succeeded);
    assert_eq!((done.polls, done.failed_polls), (5, 1));
    assert_eq!(done.submit_unanswered, None);
    let book = book.lock().unwrap();
    assert_eq!((book.submits, book.polls, book.cancels), (1, 6, 0));
}

#[tokio::test]
async fn a_cancel_midway_sends_cancel_task_once() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, false).await;
    let budget = OperationBudget::new(Duration::from_secs(60));
    let canceller = budget.clone();
    let watched = book.clone();
    tokio::spawn(async move {
        while watched.lock().unwrap().polls < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        canceller.cancel();
    });
    let err = budget
        .run(quick().run(&mut task(client)))
        .await
        .unwrap_err();
    match err {
        FollowError::Cancelled {
            reason,
            cancel: CancelSent::Answered { cancelled },
            last,
        } => {
            assert_eq!(reason, CancelReason::BudgetCancelled);
            assert!(cancelled);
            assert_eq!(last.unwrap().state(), Running);
        }
        other => panic!("{other}"),
    }
    let polls = book.lock().unwrap().polls;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let book = book.lock().unwrap();
    assert_eq!((book.submits, book.cancels), (1, 1), "CancelTask once");
    assert_eq!(book.polls, polls, "no poll after the cancel");
}

#[tokio::test]
async fn a_cancel_before_the_submit_sends_nothing() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, false).await;
    let budget = OperationBudget::new(Duration::from_secs(60));
    budget.cancel();
    let err = budget
        .run(quick().run(&mut task(client)))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        FollowError::Cancelled {
            cancel: CancelSent::NotNeeded,
            ..
        }
    ));
    let book = book.lock().unwrap();
    assert_eq!((book.submits, book.polls, book.cancels), (0, 0, 0));
}

#[tokio::test]
async fn a_slow_submit_is_followed_by_status_never_sent_again() {
    let (client, book) = scheduler(
        [Ok(Running), Ok(Succeeded)].into(),
        Duration::from_secs(30),
        false,
    )
    .await;
    let start = Instant::now();
    let done = quick()
        .submit_timeout(Duration::from_secs(1))
        .run(&mut task(client))
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert_eq!(done.status.state(), Succeeded);
    assert_eq!(
        done.submit_unanswered,
        Some(CallEffect::MutationIndeterminate)
    );
    assert_eq!(book.lock().unwrap().submits, 1, "never sent again");
}

#[tokio::test]
async fn a_submit_the_scheduler_never_took_is_reported_safe_to_send_again() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::from_secs(30), true).await;
    let err = quick()
        .submit_timeout(Duration::from_secs(1))
        .run(&mut task(client))
        .await
        .unwrap_err();
    assert!(matches!(err, FollowError::NotTaken(_)), "{err}");
    assert_eq!(book.lock().unwrap().submits, 1);
}

#[tokio::test]
async fn a_budget_that_runs_out_leaves_the_task_running_and_says_so() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, false).await;
    let follow = Follow::new()
        .poll_every(Duration::from_millis(100))
        .poll_backoff(1.0, Duration::from_millis(100));
    let err = OperationBudget::new(Duration::from_millis(400))
        .run(follow.run(&mut task(client)))
        .await
        .unwrap_err();
    match err {
        FollowError::BudgetSpent { last } => assert_eq!(last.unwrap().state(), Running),
        other => panic!("{other}"),
    }
    assert_eq!(book.lock().unwrap().cancels, 0);
}
