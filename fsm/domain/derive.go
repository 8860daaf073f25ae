package domain

// TaskCounts counts a run's tasks by state.
type TaskCounts map[TaskState]int

// Total is the number of tasks counted.
func (c TaskCounts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// CountTasks counts a list of task states.
func CountTasks(tasks []TaskState) TaskCounts {
	c := TaskCounts{}
	for _, t := range tasks {
		c[t]++
	}
	return c
}

// DeriveRunState computes a run's state from its current state and the
// states of its tasks (see Derive).
func DeriveRunState(current RunState, tasks []TaskState) RunState {
	return Derive(current, CountTasks(tasks))
}

// Derive computes a run's state from its current state and its task counts.
// It is the only place run state is decided by tasks; verbs (cancel,
// interrupt, resume, revert) change it explicitly.
//
// Forward execution (pending, running), by precedence:
//
//	cancelled > failed > all succeeded (or skipped) > any started > pending
//
// A skipped task (decided by a trigger rule or a condition, from
// state-machine version 2) counts like a succeeded one: a run whose tasks
// all succeeded or were skipped succeeded. A run that uses decisions is
// derived by DeriveDecided.
//
// where "started" is any task past pending (ready, running, retrying,
// succeeded): admission promotes a run's roots to ready, so an admitted run
// is running and a run still waiting for admission is pending. An empty run
// is never a success. When no task has started, or there is none, the run
// keeps its current state: a pending run stays pending, and a running run
// never goes back to pending (the run machine has no such edge).
//
// Reverting: any task still reverting keeps the run reverting; once none
// is, a task whose compensation failed makes the run failed, otherwise the
// run is reverted.
//
// Final and settled states (succeeded, cancelled, reverted, failed) and
// interrupted never change by derivation: only a verb leaves them.
func Derive(current RunState, c TaskCounts) RunState {
	switch current {
	case RunPending, RunRunning:
		total := c.Total()
		switch {
		case total == 0:
			return current
		case c[TaskCancelled] > 0:
			return RunCancelled
		case c[TaskFailed] > 0:
			return RunFailed
		case c[TaskSucceeded]+c[TaskSkipped] == total:
			return RunSucceeded
		case c[TaskPending] == total:
			return current
		default:
			return RunRunning
		}
	case RunReverting:
		switch {
		case c[TaskReverting] > 0:
			return RunReverting
		case c[TaskFailed] > 0:
			return RunFailed
		default:
			return RunReverted
		}
	default:
		return current
	}
}
