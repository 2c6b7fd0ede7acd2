//! Submit once, then follow, over loopback against a scripted scheduler: a task that
//! takes five status polls to finish with one poll failing `UNAVAILABLE`; a cancel
//! midway that sends `CancelTask` once; a slow submit whose answer is lost followed by
//! status, never re-sent; a lost submit the scheduler never saw, said to be not taken
//! only after its settle window; one the scheduler registers late, followed to its
//! end; a budget that runs out (inside the settle window: indeterminate); a follow
//! outside any budget ended by its own limit; a zero poll interval floored; a cancel
//! bounded on a scheduler that does not answer it; an empty task id never polled.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sw4rm_timeouts::follow::{
    CancelSent, Follow, FollowError, SchedulerTask, DEFAULT_NOT_FOUND_SETTLE, NOT_FOUND_POLLS,
};
use sw4rm_timeouts::proto::sw4rm::scheduler::scheduler_service_server::{
    SchedulerService, SchedulerServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::scheduler::{
    CancelTaskRequest, CancelTaskResponse, GetTaskStatusRequest, GetTaskStatusResponse,
    PollActivityBufferRequest, PollActivityBufferResponse, PreemptRequest, PreemptResponse,
    PurgeActivityRequest, PurgeActivityResponse, ShutdownAgentRequest, ShutdownAgentResponse,
    SubmitTaskRequest, SubmitTaskResponse, TaskState,
};
use sw4rm_timeouts::{
    CallEffect, CancelReason, OperationBudget, Sw4rm, TimeoutDetails, TimeoutProfileLayer,
};
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
    /// The task ids the submits and the polls carried, in turn.
    ids: Vec<String>,
}

/// When the scheduler makes a submitted task known to its status RPC.
#[derive(Clone, Copy)]
enum Registers {
    /// As the submit arrives.
    AtOnce,
    /// This long after the submit arrived (a handler cut by the caller's timeout that
    /// commits anyway).
    After(Duration),
    /// Never: the submit arrives and is lost.
    Never,
}

/// A scheduler answering from a script.
struct Scheduler {
    book: Arc<Mutex<Book>>,
    script: Answers,
    submit_latency: Duration,
    registers: Registers,
    cancel_latency: Duration,
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
        {
            let mut book = self.book.lock().unwrap();
            book.submits += 1;
            book.ids.push(id.clone());
            match self.registers {
                Registers::AtOnce => {
                    book.tasks.insert(id.clone(), self.script.clone());
                }
                Registers::After(delay) => {
                    // Committed whether or not the caller is still waiting.
                    let (book, script) = (self.book.clone(), self.script.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        book.lock().unwrap().tasks.insert(id, script);
                    });
                }
                Registers::Never => {}
            }
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
        book.ids.push(id.clone());
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
        tokio::time::sleep(self.cancel_latency).await;
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
    registers: Registers,
) -> (Sw4rm, Arc<Mutex<Book>>) {
    scheduler_with(
        script,
        submit_latency,
        registers,
        TimeoutProfileLayer::standard(),
    )
    .await
}

async fn scheduler_with(
    script: Answers,
    submit_latency: Duration,
    registers: Registers,
    layer: TimeoutProfileLayer,
) -> (Sw4rm, Arc<Mutex<Book>>) {
    serve(
        Scheduler {
            book: Arc::new(Mutex::new(Book::default())),
            script,
            submit_latency,
            registers,
            cancel_latency: Duration::ZERO,
        },
        layer,
    )
    .await
}

async fn serve(service: Scheduler, layer: TimeoutProfileLayer) -> (Sw4rm, Arc<Mutex<Book>>) {
    let book = service.book.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
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
    let (client, book) =
        scheduler_with(script.into(), Duration::ZERO, Registers::AtOnce, layer).await;
    let done = quick().run(&mut task(client)).await.unwrap();
    assert_eq!(done.status.state(), Succeeded);
    assert_eq!((done.polls, done.failed_polls), (5, 1));
    assert_eq!(done.submit_unanswered, None);
    let book = book.lock().unwrap();
    assert_eq!((book.submits, book.polls, book.cancels), (1, 6, 0));
}

#[tokio::test]
async fn a_cancel_midway_sends_cancel_task_once() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, Registers::AtOnce).await;
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
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, Registers::AtOnce).await;
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
        Registers::AtOnce,
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
async fn a_submit_the_scheduler_never_took_is_reported_safe_to_send_again_after_the_settle_window()
{
    let (client, book) = scheduler(
        [Ok(Running)].into(),
        Duration::from_secs(30),
        Registers::Never,
    )
    .await;
    let settle = Duration::from_millis(600);
    let sent = Instant::now();
    let err = quick()
        .submit_timeout(Duration::from_millis(200))
        .not_found_settle(settle)
        .run(&mut task(client))
        .await
        .unwrap_err();
    assert!(matches!(err, FollowError::NotTaken(_)), "{err}");
    assert!(sent.elapsed() >= settle, "not before the settle window");
    let book = book.lock().unwrap();
    assert_eq!(book.submits, 1);
    assert!(
        book.polls >= NOT_FOUND_POLLS as usize,
        "{} polls",
        book.polls
    );
}

#[tokio::test]
async fn a_submit_the_scheduler_registers_late_is_followed_to_its_end_not_declared_safe() {
    // The submit is cut at 200 ms; the scheduler commits it 700 ms after it arrived:
    // the early polls meet NOT_FOUND, which proves nothing within the settle window.
    let (client, book) = scheduler(
        [Ok(Running), Ok(Succeeded)].into(),
        Duration::from_secs(30),
        Registers::After(Duration::from_millis(700)),
    )
    .await;
    let done = quick()
        .submit_timeout(Duration::from_millis(200))
        .not_found_settle(Duration::from_secs(3))
        .run(&mut task(client))
        .await
        .unwrap();
    assert_eq!(done.status.state(), Succeeded);
    assert_eq!(
        done.submit_unanswered,
        Some(CallEffect::MutationIndeterminate)
    );
    assert!(
        done.failed_polls >= 1,
        "the early NOT_FOUNDs were polled again"
    );
    assert_eq!(book.lock().unwrap().submits, 1, "never sent again");
}

#[tokio::test]
async fn a_budget_that_ends_inside_the_settle_window_is_indeterminate() {
    let (client, _book) = scheduler(
        [Ok(Running)].into(),
        Duration::from_secs(30),
        Registers::Never,
    )
    .await;
    let err = OperationBudget::new(Duration::from_millis(800))
        .run(
            quick()
                .submit_timeout(Duration::from_millis(200))
                .run(&mut task(client)),
        )
        .await
        .unwrap_err();
    match err {
        FollowError::Indeterminate {
            status,
            not_found_polls,
            since_sent,
        } => {
            assert_eq!(status.code(), Code::NotFound);
            assert!(not_found_polls >= 1);
            assert!(since_sent >= Duration::from_millis(200));
            assert!(since_sent < DEFAULT_NOT_FOUND_SETTLE);
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_follow_outside_any_budget_ends_by_its_own_limit() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, Registers::AtOnce).await;
    let limit = Duration::from_millis(500);
    let start = Instant::now();
    let err = quick()
        .limit(limit)
        .run(&mut task(client))
        .await
        .unwrap_err();
    match err {
        FollowError::BudgetSpent { last } => assert_eq!(last.unwrap().state(), Running),
        other => panic!("{other}"),
    }
    assert!(start.elapsed() >= limit - Duration::from_millis(60));
    assert!(book.lock().unwrap().polls >= 1);
}

#[tokio::test]
async fn a_zero_poll_interval_is_floored() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, Registers::AtOnce).await;
    let budget = Duration::from_millis(500);
    let follow = Follow::new()
        .poll_every(Duration::ZERO)
        .poll_backoff(1.0, Duration::ZERO);
    let err = OperationBudget::new(budget)
        .run(follow.run(&mut task(client)))
        .await
        .unwrap_err();
    assert!(matches!(err, FollowError::BudgetSpent { .. }), "{err}");
    // Each wait is at least 50 ms: at most ten polls in 500 ms (269 unfloored).
    let polls = book.lock().unwrap().polls;
    assert!((1..=10).contains(&polls), "{polls} polls");
}

#[tokio::test]
async fn a_cancel_rpc_the_scheduler_does_not_answer_is_bounded() {
    let (client, book) = serve(
        Scheduler {
            book: Arc::default(),
            script: [Ok(Running)].into(),
            submit_latency: Duration::ZERO,
            registers: Registers::AtOnce,
            cancel_latency: Duration::from_secs(60),
        },
        TimeoutProfileLayer::standard(),
    )
    .await;
    let budget = OperationBudget::new(Duration::from_secs(60));
    let canceller = budget.clone();
    let watched = book.clone();
    tokio::spawn(async move {
        while watched.lock().unwrap().polls < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        canceller.cancel();
    });
    let follow = quick().cancel_timeout(Duration::from_millis(300));
    // Far above the bound, far below the route's 30 s that bounded it before.
    let err = tokio::time::timeout(
        Duration::from_secs(20),
        budget.run(follow.run(&mut task(client))),
    )
    .await
    .expect("the cancel RPC waited past its bound")
    .unwrap_err();
    match err {
        FollowError::Cancelled {
            cancel: CancelSent::Failed(status),
            ..
        } => {
            assert_eq!(status.code(), Code::DeadlineExceeded);
            let details = TimeoutDetails::from_status(&status).expect("timeout details");
            assert!(details.configured_timeout_ms() <= 300, "{details}");
            // The follow's own bound, named as the budget it is (it read `inherited`).
            assert_eq!(
                details.source(),
                &sw4rm_timeouts::Source::Budget,
                "{details}"
            );
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn an_empty_task_id_is_never_submitted_or_polled_empty() {
    let (client, book) = scheduler([Ok(Succeeded)].into(), Duration::ZERO, Registers::AtOnce).await;
    let mut task = SchedulerTask::new(client, SubmitTaskRequest::default());
    assert!(!task.task_id().is_empty());
    let done = quick().run(&mut task).await.unwrap();
    assert_eq!(done.status.state(), Succeeded);
    let book = book.lock().unwrap();
    assert_eq!(book.ids.len(), 2, "{:?}", book.ids);
    assert!(
        book.ids.iter().all(|id| id == task.task_id()),
        "{:?}",
        book.ids
    );
}

#[tokio::test]
async fn a_budget_that_runs_out_leaves_the_task_running_and_says_so() {
    let (client, book) = scheduler([Ok(Running)].into(), Duration::ZERO, Registers::AtOnce).await;
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
