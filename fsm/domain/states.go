package domain

// RunState is the state of a workflow run. The enum is closed: Machine
// validation rejects any state that is not listed in RunStates.
type RunState string

// Run states, as named by the client protocol.
const (
	RunPending     RunState = "pending"
	RunRunning     RunState = "running"
	RunSucceeded   RunState = "succeeded"
	RunFailed      RunState = "failed"
	RunCancelled   RunState = "cancelled"
	RunInterrupted RunState = "interrupted"
	RunReverting   RunState = "reverting"
	RunReverted    RunState = "reverted"
)

// RunStates is the run-state enum in display order.
var RunStates = []RunState{
	RunPending, RunRunning, RunInterrupted, RunReverting,
	RunSucceeded, RunFailed, RunCancelled, RunReverted,
}

// TaskState is the state of one task run within a run.
type TaskState string

// Task states, as named by the client protocol.
const (
	TaskPending   TaskState = "pending"
	TaskReady     TaskState = "ready"
	TaskRunning   TaskState = "running"
	TaskSucceeded TaskState = "succeeded"
	TaskFailed    TaskState = "failed"
	TaskRetrying  TaskState = "retrying"
	TaskCancelled TaskState = "cancelled"
	TaskReverting TaskState = "reverting"
	TaskReverted  TaskState = "reverted"
	// TaskSkipped: the task's trigger rule or its when condition decided
	// not to run it (decide.go). Settled, not a failure: the run's state
	// counts it like a success.
	TaskSkipped TaskState = "skipped"
)

// TaskStates is the task-state enum in display order.
var TaskStates = []TaskState{
	TaskPending, TaskReady, TaskRunning, TaskRetrying,
	TaskSucceeded, TaskFailed, TaskSkipped, TaskCancelled, TaskReverting, TaskReverted,
}

// Valid reports whether s is a member of the run-state enum.
func (s RunState) Valid() bool { return RunMachine.HasState(s) }

// Valid reports whether s is a member of the task-state enum.
func (s TaskState) Valid() bool { return TaskMachine.HasState(s) }

// Final reports whether no edge leaves s.
func (s RunState) Final() bool { return RunMachine.IsFinal(s) }

// Done reports whether the run is finished for forward execution: final, or
// settled (failed: only a revert can still leave it). run.wait returns on Done.
func (s RunState) Done() bool { return RunMachine.IsFinal(s) || RunMachine.IsSettled(s) }

// Final reports whether no edge leaves s.
func (s TaskState) Final() bool { return TaskMachine.IsFinal(s) }

// Done reports whether the task is finished for forward execution.
func (s TaskState) Done() bool { return TaskMachine.IsFinal(s) || TaskMachine.IsSettled(s) }

// Leased reports whether a task in state s holds a lease (a worker owns it).
// Only running tasks and reverting tasks whose compensation is running hold
// one; the latter is recorded in the task's compensation phase, not here.
func (s TaskState) Leased() bool { return s == TaskRunning }
