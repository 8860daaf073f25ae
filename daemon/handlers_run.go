package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/expr"
	"github.com/flowd/flowd/rpc"
)

// Run methods.

// runReader is what the run handlers read of the replicated state.
type runReader interface {
	ResolveRunID(short string) (string, error)
	GetRun(id string) (*fsm.Run, []*fsm.Task, error)
	GetRunOnly(id string) (*fsm.Run, error)
	GetSpec(id string) (*domain.Spec, error)
	ListRunsWhere(state domain.RunState, q fsm.RunFilter, limit int, cursor string) ([]*fsm.Run, string, error)
	CountRuns() (map[domain.RunState]int, error)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{domain.ErrInvalidArgument}, args...)...)
}

// newRunID returns a UUIDv7: time-ordered, so run keys sort by creation.
func newRunID() string { return uuid.Must(uuid.NewV7()).String() }

func checkRunID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", invalid("id %q is not a UUID (omit it and the agent picks a UUIDv7)", id)
	}
	return u.String(), nil
}

func (a *Agent) runSubmit(ctx context.Context, p rpc.SubmitParams) (rpc.SubmitResult, error) {
	inline := len(p.Workflow) != 0 && string(p.Workflow) != "null"
	if !inline && p.Definition == "" {
		return rpc.SubmitResult{}, invalid("workflow is required: a spec object with tasks (or definition: the name of a stored one)")
	}
	if inline && p.Definition != "" {
		return rpc.SubmitResult{}, invalid("give workflow (an inline spec) or definition (a stored one, name or name@version), not both")
	}
	defName, defVersion := "", 0
	var err error
	if p.Definition != "" {
		if defName, defVersion, err = domain.ParseDefinitionRef(p.Definition, domain.DefaultLimits); err != nil {
			return rpc.SubmitResult{}, invalid("%v", err)
		}
	}
	var fills []fill // what a follower adds to the params its client sent
	sentID := p.ID
	if p.ID == "" {
		p.ID = newRunID() // before forwarding, so a retried forward is idempotent
		fills = append(fills, fill{name: "id", value: p.ID})
	} else if p.ID, err = checkRunID(p.ID); err != nil {
		return rpc.SubmitResult{}, err
	}
	if len(p.Nonce) > 128 {
		return rpc.SubmitResult{}, invalid("nonce must be at most 128 bytes")
	}
	if err := checkLabels(p.Labels); err != nil {
		return rpc.SubmitResult{}, err
	}
	startAt, err := checkDelay(p.StartAt, p.DelayMS)
	if err != nil {
		return rpc.SubmitResult{}, err
	}
	if p.Nonce == "" {
		p.Nonce = rpc.NewRequestID() // before forwarding: a retried forward is answered created:true
		fills = append(fills, fill{name: "nonce", value: p.Nonce})
	}
	var sent any = p // forwarded encoded again when the id was spelled otherwise
	if p.ID == sentID || sentID == "" {
		sent = asSent(ctx, rpc.MethodRunSubmit, p, fills...)
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	// The spec is parsed and validated where the submit is proposed: a
	// follower forwards the params as they came and relays the leader's
	// answer (a bad spec gets the same -32003 either way).
	return onLeader(ctx, a.proxy, rpc.MethodRunSubmit, sent, func(ctx context.Context) (rpc.SubmitResult, error) {
		a.raiseIfFresh(ctx)
		if defName != "" {
			r, idx, err := propose[fsm.SubmitResult](ctx, a.prop, &fsm.SubmitDefinition{Definition: defName, Version: defVersion,
				ID: p.ID, Input: p.Input, Labels: p.Labels, IfFull: p.IfFull, Nonce: p.Nonce, StartAt: startAt, DelayMS: p.DelayMS}, grouped)
			if err != nil {
				return rpc.SubmitResult{}, err
			}
			return rpc.SubmitResult{ID: r.ID, State: r.State, Created: r.Created, Index: idx}, nil
		}
		spec, err := a.specs.parse(p.Workflow, a.state.Limits())
		err = expr.Validate(spec, err) // the when conditions compile
		if err == nil {
			err = fsm.SpecNeedsVersion(spec, a.state.ActiveVersion()) // refused before it is proposed
		}
		if err != nil {
			return rpc.SubmitResult{}, err
		}
		r, idx, err := propose[fsm.SubmitResult](ctx, a.prop, &fsm.Submit{ID: p.ID, Spec: spec, Input: p.Input, Labels: p.Labels, IfFull: p.IfFull, Nonce: p.Nonce,
			StartAt: startAt, DelayMS: p.DelayMS}, grouped)
		if err != nil {
			return rpc.SubmitResult{}, err
		}
		return rpc.SubmitResult{ID: r.ID, State: r.State, Created: r.Created, Index: idx}, nil
	})
}

// resolve turns a full or short run id into the full id.
func (a *Agent) resolve(id string) (string, error) {
	if id == "" {
		return "", invalid("id is required")
	}
	return a.state.ResolveRunID(id)
}

// consistently runs read on the leader after a barrier when asked to, so
// the read reflects every write acknowledged before it.
func consistently[R any](ctx context.Context, a *Agent, consistent bool, method string, params any, read func() (R, error)) (R, error) {
	if !consistent {
		return read()
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, method, params, func(ctx context.Context) (R, error) {
		if err := a.prop.Barrier(ctx); err != nil {
			var zero R
			return zero, err
		}
		return read()
	})
}

func (a *Agent) runGet(ctx context.Context, p rpc.IDParams) (rpc.Run, error) {
	return consistently(ctx, a, p.Consistent, rpc.MethodRunGet, p, func() (rpc.Run, error) {
		id, err := a.resolve(p.ID)
		if err != nil {
			return rpc.Run{}, err
		}
		r, tasks, err := a.state.GetRun(id)
		if err != nil {
			return rpc.Run{}, err
		}
		spec, err := a.state.GetSpec(id)
		if err != nil {
			return rpc.Run{}, err
		}
		out := toRun(r, tasks, spec)
		if cr, ok := a.state.(interface {
			ChildRuns(id string) (map[string]string, error)
		}); ok && spec != nil && spec.UsesChildRuns() {
			kids, err := cr.ChildRuns(id)
			if err != nil {
				return rpc.Run{}, err
			}
			out.Children = kids
			for i := range out.Tasks {
				out.Tasks[i].ChildRun = kids[out.Tasks[i].Key]
			}
		}
		out.WaitingForWorker, out.WaitingForWorkerNote = a.waitingForWorker(ctx, tasks)
		a.waitingOn(r, tasks, out.WaitingForWorker, &out)
		return out, nil
	})
}

func (a *Agent) runList(ctx context.Context, p rpc.ListParams) (rpc.ListResult, error) {
	if p.State != "" && !p.State.Valid() {
		return rpc.ListResult{}, invalid("state %q is not a run state (%s)", p.State, runStateNames())
	}
	q := fsm.RunFilter{Labels: p.Labels, Workflow: p.Workflow}
	if p.Selector != "" {
		var err error
		if q.Selector, err = domain.ParseSelector(p.Selector); err != nil {
			return rpc.ListResult{}, err // names the term; wraps ErrInvalidArgument (-32602)
		}
	}
	if p.Definition != "" {
		var err error
		if q.Definition, q.DefinitionVersion, err = domain.ParseDefinitionRef(p.Definition, domain.DefaultLimits); err != nil {
			return rpc.ListResult{}, invalid("definition: %v", err)
		}
	}
	return consistently(ctx, a, p.Consistent, rpc.MethodRunList, p, func() (rpc.ListResult, error) {
		if !p.CreatedAfter.IsZero() {
			q.CreatedAfter = p.CreatedAfter.UnixMilli()
		}
		if !p.CreatedBefore.IsZero() {
			q.CreatedBefore = p.CreatedBefore.UnixMilli()
		}
		runs, next, err := a.state.ListRunsWhere(p.State, q, p.Limit, p.Cursor)
		if err != nil {
			return rpc.ListResult{}, err
		}
		counts, err := a.state.CountRuns()
		if err != nil {
			return rpc.ListResult{}, err
		}
		out := rpc.ListResult{Runs: make([]rpc.Run, 0, len(runs)), NextCursor: next, Counts: countsOf(counts)}
		for _, r := range runs {
			out.Runs = append(out.Runs, toRun(r, nil, nil))
		}
		return out, nil
	})
}

func runStateNames() string {
	var s []string
	for _, st := range domain.RunStates {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// MaxWait caps run.wait and task.claim waits.
const MaxWait = time.Hour

func (a *Agent) runWait(ctx context.Context, p rpc.WaitParams) (rpc.WaitResult, error) {
	if p.TimeoutMS < 0 {
		return rpc.WaitResult{}, invalid("timeout_ms must be >= 0")
	}
	if p.ID == "" {
		return rpc.WaitResult{}, invalid("id is required")
	}
	wait := clampMS(p.TimeoutMS, MaxWait)
	deadline := time.Now().Add(wait)
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(waitMargin))
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRunWait, p, func(ctx context.Context) (rpc.WaitResult, error) {
		id, err := a.resolve(p.ID)
		if err != nil {
			return rpc.WaitResult{}, err
		}
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		// Every commit wakes every waiter: look at the small run record
		// only, and read the tasks once, for the answer.
		answer := func() (rpc.WaitResult, error) {
			r, tasks, err := a.state.GetRun(id)
			if err != nil {
				return rpc.WaitResult{}, err
			}
			return rpc.WaitResult{Done: r.State.Done(), Run: toRun(r, tasks, nil)}, nil
		}
		for {
			changed := a.state.Changed()
			r, err := a.state.GetRunOnly(id)
			if err != nil {
				return rpc.WaitResult{}, err
			}
			if r.State.Done() || !time.Now().Before(deadline) {
				return answer()
			}
			select {
			case <-changed:
			case <-timer.C:
			case <-ctx.Done():
				return answer()
			}
		}
	})
}

// verbSpec says which run states a verb may act on, and in which it is a
// no-op (changed: false) rather than an illegal transition.
type verbSpec struct {
	msg   fsm.MsgType
	name  string
	edges []string
	noop  []domain.RunState
}

var verbs = map[string]verbSpec{
	rpc.MethodRunCancel: {fsm.MsgCancelRun, "cancel",
		[]string{domain.EdgeCancel, domain.EdgeCancelBeforeStart, domain.EdgeCancelInterrupted}, []domain.RunState{domain.RunCancelled}},
	rpc.MethodRunInterrupt: {fsm.MsgInterrupt, "interrupt", []string{domain.EdgeInterrupt}, []domain.RunState{domain.RunInterrupted}},
	rpc.MethodRunResume:    {fsm.MsgResume, "resume", []string{domain.EdgeResume}, []domain.RunState{domain.RunRunning, domain.RunReverting}},
	rpc.MethodRunRevert:    {fsm.MsgRevert, "revert", []string{domain.EdgeRevert}, []domain.RunState{domain.RunReverting, domain.RunReverted}},
}

// checkVerb raises IllegalTransition before anything is proposed when the
// verb's edges cannot leave the run's state.
func checkVerb(v verbSpec, s domain.RunState) (noop bool, err error) {
	for _, e := range v.edges {
		if domain.RunMachine.Can(s, e) {
			return false, nil
		}
	}
	for _, n := range v.noop {
		if n == s {
			return true, nil
		}
	}
	var from []string
	for _, e := range v.edges {
		edge, _ := domain.RunMachine.Edge(e)
		for _, f := range edge.From {
			from = append(from, string(f))
		}
	}
	return false, fmt.Errorf("%w: cannot %s a %s run (%s applies to %s runs)",
		domain.ErrIllegalTransition, v.name, s, v.name, strings.Join(from, ", "))
}

// verb resolves the id and checks the transition on the leader, where the
// state reflects every acknowledged write, so verbs are linearizable.
func (a *Agent) verb(method string) func(context.Context, rpc.VerbParams) (rpc.ChangedResult, error) {
	v := verbs[method]
	return func(ctx context.Context, p rpc.VerbParams) (rpc.ChangedResult, error) {
		if p.ID == "" {
			return rpc.ChangedResult{}, invalid("id is required")
		}
		ctx, cancel := withTimeout(ctx, writeTimeout)
		defer cancel()
		return onLeader(ctx, a.proxy, method, p, func(ctx context.Context) (rpc.ChangedResult, error) {
			id, err := a.resolve(p.ID)
			if err != nil {
				return rpc.ChangedResult{}, err
			}
			r, err := a.state.GetRunOnly(id)
			if err != nil {
				return rpc.ChangedResult{}, err
			}
			if noop, err := checkVerb(v, r.State); err != nil || noop {
				return rpc.ChangedResult{}, err
			}
			cmd := fsm.NewRunVerb(v.msg, id)
			cmd.Reason = p.Reason
			res, idx, err := propose[fsm.ChangedResult](ctx, a.prop, cmd, alone)
			if err != nil {
				return rpc.ChangedResult{}, err
			}
			return rpc.ChangedResult{Changed: res.Changed, Index: idx}, nil
		})
	}
}

func (a *Agent) runReplay(ctx context.Context, p rpc.ReplayParams) (rpc.SubmitResult, error) {
	if p.ID == "" {
		return rpc.SubmitResult{}, invalid("id is required")
	}
	var err error
	if p.NewID == "" {
		p.NewID = newRunID() // before forwarding, so a retried forward is idempotent
	} else if p.NewID, err = checkRunID(p.NewID); err != nil {
		return rpc.SubmitResult{}, err
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodRunReplay, p, func(ctx context.Context) (rpc.SubmitResult, error) {
		parent, err := a.resolve(p.ID)
		if err != nil {
			return rpc.SubmitResult{}, err
		}
		r, idx, err := propose[fsm.SubmitResult](ctx, a.prop, &fsm.Replay{ParentID: parent, NewID: p.NewID, Input: p.Input, ReuseSucceeded: p.ReuseSucceeded}, alone)
		if err != nil {
			return rpc.SubmitResult{}, err
		}
		return rpc.SubmitResult{ID: r.ID, State: r.State, Created: r.Created, Index: idx}, nil
	})
}

func (a *Agent) runStats(_ context.Context, p rpc.IDParams) (rpc.RunStats, error) {
	id, err := a.resolve(p.ID)
	if err != nil {
		return rpc.RunStats{}, err
	}
	r, tasks, err := a.state.GetRun(id)
	if err != nil {
		return rpc.RunStats{}, err
	}
	out := rpc.RunStats{ID: r.ID, State: string(r.State), Counts: map[string]int{}}
	for s, n := range r.Counts {
		out.Counts[string(s)] = n
	}
	end := r.FinishedAt
	if end == 0 {
		end = a.state.Now()
	}
	if r.StartedAt != 0 {
		out.RunMS = end - r.StartedAt
	}
	for _, t := range tasks {
		ts := rpc.TaskStats{Key: t.Key, State: string(t.State), Attempts: len(t.Attempts)}
		out.Attempts += len(t.Attempts)
		if len(t.Attempts) > 1 {
			out.Retries += len(t.Attempts) - 1
		}
		if t.ReadyAt != 0 && len(t.Attempts) > 0 {
			ts.QueueWaitMS = max(0, t.Attempts[len(t.Attempts)-1].ClaimedAt-t.ReadyAt)
		}
		if t.StartedAt != 0 {
			stop := t.FinishedAt
			if stop == 0 {
				stop = a.state.Now()
			}
			ts.RunMS = max(0, stop-t.StartedAt)
		}
		out.Tasks = append(out.Tasks, ts)
	}
	return out, nil
}
