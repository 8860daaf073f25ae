package daemon

import (
	"strconv"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Conversions from stored records to protocol types.

func ms(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t).UTC()
}

func itoa(n int) string { return strconv.Itoa(n) }

func toRun(r *fsm.Run, tasks []*fsm.Task, spec *domain.Spec) rpc.Run {
	out := rpc.Run{
		ID: r.ID, Workflow: r.Workflow, State: r.State, OnFailure: r.OnFailure,
		CreatedAt: ms(r.CreatedAt), StartedAt: ms(r.StartedAt), FinishedAt: ms(r.FinishedAt),
		ParentID: r.ParentID, ReplayOf: r.ReplayOf, Labels: r.Labels, Input: r.Input, Reason: r.Reason,
		PausedQueues: r.PausedQueues, Counts: map[string]int{}, TaskCount: r.Tasks(), ModifyIndex: r.ModifyIndex,
		StartAt: ms(r.StartAt), DeadlineMS: r.DeadlineMS, DeadlineAt: ms(r.DeadlineAt),
		Scheduled:  r.State == domain.RunPending && r.StartAt != 0 && r.AdmitSeq == 0,
		Definition: r.Definition, DefinitionVersion: r.DefinitionVersion,
	}
	for s, n := range r.Counts {
		out.Counts[string(s)] = n
		if s.Done() {
			out.Done += n
		}
	}
	var rules map[string]domain.TaskSpec
	finally := map[string]bool{}
	if spec != nil && spec.UsesV2() {
		rules = make(map[string]domain.TaskSpec, len(spec.Tasks))
		for _, ts := range spec.Tasks {
			rules[ts.Key] = ts
		}
		for _, ts := range spec.Finally {
			finally[ts.Key] = true
		}
	}
	for _, t := range tasks {
		tv := toTask(t, false)
		tv.When, tv.Trigger, tv.Finally = rules[t.Key].When, rules[t.Key].Trigger, finally[t.Key]
		out.Tasks = append(out.Tasks, tv)
	}
	out.Spec = spec
	return out
}

func toTask(t *fsm.Task, detail bool) rpc.Task {
	out := rpc.Task{
		ID: t.ID(), RunID: t.RunID, Key: t.Key, Type: t.Type, Queue: t.Queue, State: t.State,
		Attempt: t.Attempt, MaxAttempts: t.Retry.MaxAttempts, FencingToken: t.FencingToken,
		LeaseOwner: t.LeaseOwner, LeaseExpiresAt: ms(t.LeaseExpiresAt), ReadyAt: ms(t.ReadyAt),
		RetryAt: ms(t.RetryAt), StartedAt: ms(t.StartedAt), FinishedAt: ms(t.FinishedAt),
		Priority: t.Priority, RevertType: t.RevertType, SpawnedBy: t.SpawnedBy, Deps: t.Deps,
		Result: t.Result, Error: t.Error, Reused: t.Reused,
		TimeoutMS: t.TimeoutMS, ScheduleToStartMS: t.ScheduleToStartMS, Signal: t.Signal, SignalID: t.SignalID,
		ScheduleToStartPolicy: t.ScheduleToStartPolicy, Late: t.Late,
	}
	if t.State == domain.TaskRetrying {
		out.NotBefore = ms(t.RetryAt)
	}
	if t.Retry.MaxAttempts > 0 {
		rp := t.Retry
		out.Retry = &rp
	}
	// A sleep task (type sleep with a timer: no worker attempts) sleeps
	// like a wait task waits.
	if t.Type == domain.TypeWait || t.Type == domain.TypeSleep && len(t.Attempts) == 0 && t.FencingToken != 0 {
		out.Waiting = t.State == domain.TaskReady
		out.Signal = t.ListensFor()
	}
	if t.TimeoutAt != 0 {
		out.DeadlineAt = ms(t.TimeoutAt)
	} else if t.DueAt != 0 {
		out.DeadlineAt = ms(t.DueAt)
	}
	if out.Deps == nil {
		out.Deps = []string{}
	}
	if n := len(t.Attempts); n > 0 {
		out.Worker = t.Attempts[n-1].Worker
	}
	if t.Comp != nil {
		out.Compensation = &rpc.Compensation{Phase: t.Comp.Phase, Attempt: t.Comp.Attempt, RetryAt: ms(t.Comp.RetryAt), Error: t.Comp.Error}
	}
	if detail {
		out.Input = t.Input
		for _, at := range t.Attempts {
			out.Attempts = append(out.Attempts, rpc.Attempt{N: at.N, Worker: at.Worker, FencingToken: at.Token,
				ClaimedAt: ms(at.ClaimedAt), EndedAt: ms(at.EndedAt), AckedAt: ms(at.AckedAt), Outcome: at.Outcome, Error: at.Error, Compensation: at.Compensation})
		}
	}
	return out
}

func toClaimed(c fsm.Claimed) rpc.Claimed {
	return rpc.Claimed{
		TaskID: c.TaskID, RunID: c.RunID, TaskKey: c.TaskKey, Type: c.Type, Queue: c.Queue, Input: c.Input,
		RunInput: c.RunInput, Attempt: c.Attempt, FencingToken: c.FencingToken, LeaseMS: c.LeaseMS,
		LeaseExpiresAt: ms(c.LeaseExpiresAt), DepResults: c.DepResults, Compensation: c.Compensation, Result: c.Result,
		TimeoutMS: c.TimeoutMS, DeadlineAt: ms(c.DeadlineAt),
	}
}

func toEvent(e fsm.Event) rpc.Event {
	return rpc.Event{Index: e.Index, Seq: e.Seq, Kind: e.Kind, RunID: e.RunID, TaskKey: e.TaskKey, Name: e.Name,
		Transition: e.Transition, From: e.From, To: e.To, At: ms(e.At), Attempt: e.Attempt, Worker: e.Worker,
		Queue: e.Queue, Type: e.Type, Error: e.Error}
}

func toBreaker(b fsm.Breaker) rpc.Breaker {
	return rpc.Breaker{Type: b.Type, State: b.State, Failures: b.Failures, OpenedAt: ms(b.OpenedAt)}
}

func countsOf(m map[domain.RunState]int) map[string]int {
	out := map[string]int{}
	for _, s := range domain.RunStates {
		out[string(s)] = m[s]
	}
	return out
}
