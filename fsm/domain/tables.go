package domain

// Edge names. They are part of the event stream (an event's "transition"
// field), so they are stable API: add, never rename.
const (
	// Run edges (FlowForge's five, TaskFlow's revert/interrupt/resume).
	EdgeStart             = "start"
	EdgeCancelBeforeStart = "cancel_before_start"
	EdgeSucceed           = "succeed"
	EdgeFail              = "fail"
	EdgeCancel            = "cancel"
	EdgeInterrupt         = "interrupt"
	EdgeResume            = "resume"
	EdgeRevert            = "revert"
	EdgeReverted          = "reverted"
	EdgeRevertFailed      = "revert_failed"
	EdgeCancelInterrupted = "cancel_interrupted"

	// Task edges (FlowForge's ten, plus cancel_retrying, reuse_result and
	// the compensation edges revert/reverted/revert_failed shared by name).
	EdgeDependenciesSatisfied = "dependencies_satisfied"
	EdgeCancelPending         = "cancel_pending"
	EdgeClaim                 = "claim"
	EdgeCancelReady           = "cancel_ready"
	EdgeCancelRunning         = "cancel_running"
	EdgeReapLease             = "reap_lease"
	EdgeScheduleRetry         = "schedule_retry"
	EdgeRetryReady            = "retry_ready"
	EdgeCancelRetrying        = "cancel_retrying"
	EdgeReuseResult           = "reuse_result"
	EdgeCancelReverting       = "cancel_reverting"
	// EdgeTimeout: an attempt ran past its timeout_ms (running), or a task
	// waited past its timeout_ms or schedule_to_start_ms (ready).
	EdgeTimeout = "timeout"
	// EdgeSignal: a signal completed a waiting (ready) wait task.
	EdgeSignal = "signal"
	// EdgeSkip: a pending task whose dependencies settled is not run: its
	// trigger rule is not met or its when condition is false (decide.go).
	EdgeSkip = "skip"
	// EdgeConditionFailed: a pending task's when condition could not be
	// evaluated (an error, or its cost limit); the task fails unrun.
	EdgeConditionFailed = "condition_failed"
	// EdgeRetry (run): run.retry takes a failed or cancelled run back to
	// running, in the same run (retry.go; version 2).
	EdgeRetry = "retry"
	// EdgeReset (task): run.retry takes a failed, cancelled or skipped
	// task back to pending, its attempt history kept, and a finally task
	// whatever its outcome, to run again after the retried body (version 2).
	EdgeReset = "reset"
	// EdgeGather and EdgeGatherFailed end a for_each task: every element
	// task succeeded, or one failed for good (loop.go; version 2).
	EdgeGather       = "gather"
	EdgeGatherFailed = "gather_failed"
	// EdgeChildSucceeded and EdgeChildFailed end a task of type run: its
	// child run succeeded, or ended otherwise (child.go; version 2).
	EdgeChildSucceeded = "child_succeeded"
	EdgeChildFailed    = "child_failed"
)

// RunMachine is the run state machine.
//
// Terminal reading: succeeded and reverted are final (nothing leaves them).
// failed and cancelled are settled: the run is over for forward execution
// and run.wait returns, but a revert (saga) may still leave a failed run,
// because it can be undone with compensation handlers, and run.retry
// (version 2) takes either back to running in the same run. reverted is kept as its own
// terminal state (TaskFlow only passes through it) so users see that a run
// was undone; it counts as an unsuccessful outcome.
//
// Resuming an interrupted run takes resume (back to running) or, when the run
// was interrupted while reverting, revert (back to reverting).
var RunMachine = NewMachine(Machine[RunState]{
	Name:    "run",
	Initial: RunPending,
	States:  RunStates,
	Final:   []RunState{RunSucceeded, RunReverted},
	Settled: []RunState{RunFailed, RunCancelled},
	Edges: []Edge[RunState]{
		{Name: EdgeStart, From: []RunState{RunPending}, To: RunRunning},
		{Name: EdgeCancelBeforeStart, From: []RunState{RunPending}, To: RunCancelled},
		{Name: EdgeSucceed, From: []RunState{RunRunning}, To: RunSucceeded},
		{Name: EdgeFail, From: []RunState{RunRunning}, To: RunFailed},
		{Name: EdgeCancel, From: []RunState{RunRunning, RunReverting}, To: RunCancelled},
		{Name: EdgeInterrupt, From: []RunState{RunRunning, RunReverting}, To: RunInterrupted},
		{Name: EdgeResume, From: []RunState{RunInterrupted}, To: RunRunning},
		{Name: EdgeRevert, From: []RunState{RunRunning, RunInterrupted, RunFailed}, To: RunReverting, Kind: Compensation},
		{Name: EdgeReverted, From: []RunState{RunReverting}, To: RunReverted},
		{Name: EdgeRevertFailed, From: []RunState{RunReverting}, To: RunFailed},
		{Name: EdgeCancelInterrupted, From: []RunState{RunInterrupted}, To: RunCancelled},
		{Name: EdgeRetry, From: []RunState{RunFailed, RunCancelled}, To: RunRunning, Kind: Retry},
	},
})

// TaskMachine is the task state machine.
//
// Terminal reading: reverted is final. succeeded, failed, skipped and
// cancelled are settled (skipped: from state-machine version 2, decided by
// a trigger rule or a when condition; failed, cancelled and skipped go
// back to pending by reset, run.retry's edge, from version 2): a failed task leaves only by schedule_retry (attempts remain;
// taken in the same log entry as the failure, so no reader ever sees a
// failed task that later runs again) and both leave by revert when their run
// is undone. A reverted task is final within its run; running it again is a
// replay (a new run).
//
// Lease-spending edges (succeed, fail, reap_lease, cancel_running, and a
// running compensation) are only reachable through commands that check the
// fencing token or the lease expiry inside the state machine.
var TaskMachine = NewMachine(Machine[TaskState]{
	Name:    "task",
	Initial: TaskPending,
	States:  TaskStates,
	Final:   []TaskState{TaskReverted},
	Settled: []TaskState{TaskSucceeded, TaskFailed, TaskSkipped, TaskCancelled},
	Edges: []Edge[TaskState]{
		{Name: EdgeDependenciesSatisfied, From: []TaskState{TaskPending}, To: TaskReady},
		{Name: EdgeCancelPending, From: []TaskState{TaskPending}, To: TaskCancelled},
		{Name: EdgeClaim, From: []TaskState{TaskReady}, To: TaskRunning},
		{Name: EdgeCancelReady, From: []TaskState{TaskReady}, To: TaskCancelled},
		{Name: EdgeSucceed, From: []TaskState{TaskRunning}, To: TaskSucceeded},
		{Name: EdgeFail, From: []TaskState{TaskRunning}, To: TaskFailed},
		{Name: EdgeCancelRunning, From: []TaskState{TaskRunning}, To: TaskCancelled},
		{Name: EdgeReapLease, From: []TaskState{TaskRunning}, To: TaskReady},
		{Name: EdgeScheduleRetry, From: []TaskState{TaskFailed}, To: TaskRetrying, Kind: Retry},
		{Name: EdgeRetryReady, From: []TaskState{TaskRetrying}, To: TaskReady},
		{Name: EdgeCancelRetrying, From: []TaskState{TaskRetrying}, To: TaskCancelled},
		{Name: EdgeReuseResult, From: []TaskState{TaskPending}, To: TaskSucceeded},
		{Name: EdgeRevert, From: []TaskState{TaskSucceeded, TaskFailed, TaskRunning}, To: TaskReverting, Kind: Compensation},
		{Name: EdgeReverted, From: []TaskState{TaskReverting}, To: TaskReverted},
		{Name: EdgeRevertFailed, From: []TaskState{TaskReverting}, To: TaskFailed},
		{Name: EdgeCancelReverting, From: []TaskState{TaskReverting}, To: TaskCancelled},
		{Name: EdgeTimeout, From: []TaskState{TaskReady, TaskRunning}, To: TaskFailed},
		{Name: EdgeSignal, From: []TaskState{TaskReady}, To: TaskSucceeded},
		{Name: EdgeSkip, From: []TaskState{TaskPending}, To: TaskSkipped},
		{Name: EdgeConditionFailed, From: []TaskState{TaskPending}, To: TaskFailed},
		{Name: EdgeWake, From: []TaskState{TaskReady}, To: TaskSucceeded},
		{Name: EdgeGather, From: []TaskState{TaskReady}, To: TaskSucceeded},
		{Name: EdgeChildSucceeded, From: []TaskState{TaskReady}, To: TaskSucceeded},
		{Name: EdgeChildFailed, From: []TaskState{TaskReady}, To: TaskFailed},
		{Name: EdgeGatherFailed, From: []TaskState{TaskReady}, To: TaskFailed},
		{Name: EdgeReset, From: []TaskState{TaskFailed, TaskCancelled, TaskSkipped, TaskSucceeded}, To: TaskPending, Kind: Retry},
	},
})
