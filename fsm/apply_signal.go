package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
)

// Signals complete waiting tasks (type wait): task.signal one task by key,
// run.signal every waiting task of a run that listens for a name. The
// payload becomes the task's result, which its dependents receive like any
// result. A signal id makes a signal idempotent: a wait task remembers the
// id that completed it, so a re-sent signal is accepted again and changes
// nothing.

// TaskSignal completes one waiting task with Payload.
type TaskSignal struct {
	Stamped
	TaskID string `json:"task_id"`
	// Token, if set, must be the wait's fencing token (the index of the
	// entry that made the task wait); 0 accepts the current wait.
	Token    uint64          `json:"token,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	SignalID string          `json:"signal_id,omitempty"`
}

// RunSignal delivers the signal Name to every waiting task of run RunID
// that listens for it (its spec's signal, or its key when it names none).
type RunSignal struct {
	Stamped
	RunID    string          `json:"run_id"`
	Name     string          `json:"name"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	SignalID string          `json:"signal_id,omitempty"`
}

func (*TaskSignal) Type() MsgType { return MsgTaskSignal }
func (*RunSignal) Type() MsgType  { return MsgRunSignal }

// SignalResult answers task.signal and run.signal. Accepted false is a
// lost race (the task is not waiting: not yet, or no longer). Tasks lists
// the keys the signal completed (a re-sent signal lists them again).
type SignalResult struct {
	Accepted bool     `json:"accepted"`
	Tasks    []string `json:"tasks,omitempty"`
	// State is the task's state after the signal (task.signal).
	State domain.TaskState `json:"state,omitempty"`
}

// ListensFor is the signal name a wait task answers to.
func (t *Task) ListensFor() string {
	if t.Signal != "" {
		return t.Signal
	}
	return t.Key
}

func (a *applier) checkPayload(p json.RawMessage, signalID string) error {
	if len(p) > a.limits.MaxResultBytes {
		return fmt.Errorf("%w: payload of %d bytes exceeds the limit of %d", ErrTooLarge, len(p), a.limits.MaxResultBytes)
	}
	if p != nil && !json.Valid(p) {
		return fmt.Errorf("%w: payload is not valid JSON", ErrInvalidArgument)
	}
	if len(signalID) > MaxClaimIDBytes {
		return fmt.Errorf("%w: signal_id longer than %d bytes", ErrInvalidArgument, MaxClaimIDBytes)
	}
	return nil
}

func (a *applier) applyTaskSignal(c *TaskSignal) any {
	if err := a.checkPayload(c.Payload, c.SignalID); err != nil {
		return err
	}
	t, r, err := a.taskFor(c.TaskID)
	if err != nil {
		return err
	}
	if t.Type != domain.TypeWait && !a.isSleep(t) {
		return fmt.Errorf("%w: task %s has type %q, not %q: only a wait task takes a signal (a worker completes the others)",
			ErrInvalidArgument, c.TaskID, t.Type, domain.TypeWait)
	}
	if c.SignalID != "" && t.SignalID == c.SignalID {
		return &SignalResult{Accepted: true, Tasks: []string{t.Key}, State: t.State}
	}
	if t.State != domain.TaskReady || (c.Token != 0 && c.Token != t.FencingToken) {
		return &SignalResult{State: t.State}
	}
	a.deliverSignal(r, t, c.Payload, c.SignalID, "")
	return &SignalResult{Accepted: true, Tasks: []string{t.Key}, State: t.State}
}

func (a *applier) applyRunSignal(c *RunSignal) any {
	if err := a.checkPayload(c.Payload, c.SignalID); err != nil {
		return err
	}
	if !domain.ValidKey(c.Name) || len(c.Name) > a.limits.MaxKeyLen {
		return fmt.Errorf("%w: signal name %q must be 1-%d letters, digits, '_', '.', ':' or '-'", ErrInvalidArgument, c.Name, a.limits.MaxKeyLen)
	}
	r := a.loadRun(c.RunID)
	if r == nil {
		return fmt.Errorf("%w: run %s", ErrNotFound, c.RunID)
	}
	res := &SignalResult{}
	for _, t := range a.runTasks(r.ID) {
		if t.Type != domain.TypeWait && !a.isSleep(t) || t.ListensFor() != c.Name {
			continue
		}
		switch {
		case c.SignalID != "" && t.SignalID == c.SignalID:
		case t.State == domain.TaskReady:
			a.deliverSignal(r, t, c.Payload, c.SignalID, c.Name)
		default:
			continue
		}
		res.Tasks = append(res.Tasks, t.Key)
	}
	res.Accepted = len(res.Tasks) > 0
	return res
}

// deliverSignal completes the waiting task t with payload and promotes its
// dependents, as a completion does.
func (a *applier) deliverSignal(r *Run, t *Task, payload json.RawMessage, id, name string) {
	t.Result, t.Error, t.FinishedAt, t.SignalID = payload, "", a.now, id
	a.stepTask(r, t, domain.EdgeSignal, func(e *Event) { e.Name = name })
	a.getCounters().TasksDone++
	if a.executing(r) {
		for _, d := range t.Dependents {
			a.advance(r, a.loadTask(r.ID, d))
		}
	}
	a.derive(r)
}
