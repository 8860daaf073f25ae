package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Task methods.

// claimReader is what the dispatch path reads: whether a waiter has ready
// work, the leases a re-sent claim already holds, a task, and the leases by
// worker (idle_types.go).
type claimReader interface {
	HasReady(w fsm.Waiter, now int64) bool
	ClaimedBy(worker, req string) ([]fsm.Claimed, error)
	GetTask(id string) (*fsm.Task, error)
	LeaseOwners() map[string]int
}

func (a *Agent) taskGet(ctx context.Context, p rpc.TaskIDParams) (rpc.Task, error) {
	run, key, ok := fsm.SplitTaskID(p.ID)
	if !ok {
		return rpc.Task{}, invalid("task id %q must look like <run id>/<task key>", p.ID)
	}
	run, err := a.resolve(run)
	if err != nil {
		return rpc.Task{}, err
	}
	t, err := a.state.GetTask(run + "/" + key)
	if err != nil {
		return rpc.Task{}, err
	}
	out := toTask(t, true)
	a.taskWaitingOn(ctx, run, t, &out)
	return out, nil
}

func checkNames(kind string, names []string) error {
	for _, n := range names {
		if !domain.ValidKey(n) {
			return invalid("%s %q is not a valid name", kind, n)
		}
	}
	return nil
}

// checkClaim validates a claim's params (task.claim, or task.complete's
// claim) and applies the defaults.
func checkClaim(p *rpc.ClaimParams) error {
	if p.WorkerID == "" || len(p.WorkerID) > 200 {
		return invalid("worker_id is required (a stable name for the worker, at most 200 bytes)")
	}
	if err := checkNames("queue", p.Queues); err != nil {
		return err
	}
	if err := checkNames("type", p.Types); err != nil {
		return err
	}
	if p.Max <= 0 {
		p.Max = 1
	}
	p.Max = min(p.Max, fsm.MaxClaim)
	if p.WaitMS < 0 {
		return invalid("wait_ms must be >= 0")
	}
	if !fsm.ValidClaimIDs(p.WorkerID, p.RequestID) {
		return invalid("worker_id and request_id must be at most %d bytes, without NUL", fsm.MaxClaimIDBytes)
	}
	if p.RequestID == "" {
		p.RequestID = rpc.NewRequestID() // before forwarding: a retried forward is then idempotent
	}
	return nil
}

func (a *Agent) taskClaim(ctx context.Context, p rpc.ClaimParams) (rpc.ClaimResult, error) {
	// A client that sends no request id (a script, an outside SDK) cannot
	// re-send one after a lost answer; this agent, which picks the id, does
	// it for the client: a claim whose outcome is unknown here (the forward
	// or the claim entry timed out, the client went away) is kept, and the
	// worker's next claim through this agent carries its id, so it is
	// answered the leases the first one may have made instead of leaving
	// them with nobody until they expire.
	picked := p.RequestID == "" && !isForwarded(ctx)
	if picked && p.WorkerID != "" {
		p.RequestID = a.unknownClaims.Take(p)
	}
	if err := checkClaim(&p); err != nil {
		return rpc.ClaimResult{}, err
	}
	var fills []fill // what a follower adds to the params its client sent
	if picked {
		fills = append(fills, fill{name: "request_id", value: p.RequestID})
	}
	res, unknown, err := a.claimOnLeader(ctx, p, fills...)
	if picked && unknown {
		a.unknownClaims.Keep(p)
	}
	return res, err
}

// inputClosed is rpc.InputClosedContext: the context that ends when the
// connection serving ctx stops delivering input (a test replaces it to end
// a call's input without a connection).
var inputClosed = rpc.InputClosedContext

// claimOnLeader runs a checked claim; unknown reports an outcome this
// agent cannot vouch for (the leader may have leased tasks no one heard of).
//
// fills are the members the agent set in the params its client sent (see
// asSent).
func (a *Agent) claimOnLeader(ctx context.Context, p rpc.ClaimParams, fills ...fill) (_ rpc.ClaimResult, unknown bool, _ error) {
	wait := clampMS(p.WaitMS, MaxWait)
	deadline := time.Now().Add(wait)
	ctx, cancel := withDeadline(ctx, deadline.Add(waitMargin))
	defer cancel()
	// A worker that went away (its connection's input ended) must not be
	// handed tasks: stop waiting for it (fwdCtx ends, and the wait below
	// with it). Only the wait ends; a claim entry already proposed runs to
	// its outcome. Forwarded, the wait rides on a connection of its own
	// that is closed when the client goes away, which ends the leader's
	// wait too.
	fwdCtx, stopForward := context.WithCancel(withExclusiveForward(ctx))
	defer stopForward()
	gone := inputClosed(ctx)
	if gone != nil {
		defer context.AfterFunc(gone, stopForward)()
	}
	w := fsm.Waiter{WorkerID: p.WorkerID, Queues: p.Queues, Types: p.Types, Max: p.Max, RequestID: p.RequestID}
	res, err := onLeader(fwdCtx, a.proxy, rpc.MethodTaskClaim, asSent(ctx, rpc.MethodTaskClaim, p, fills...), func(lctx context.Context) (rpc.ClaimResult, error) {
		a.workers.waiting(p, a.cfg.NodeID, a.prop.LeaderEpoch())
		defer func() {
			a.workers.doneWaiting(p.WorkerID)
			if gone != nil && gone.Err() != nil {
				a.workers.left(p.WorkerID) // it stopped claiming: worker list drops it once it holds no lease
			}
		}()
		var got []fsm.Claimed
		var err error
		if wait > 0 {
			// The wait's own deadline, made only here on the leader (a
			// forwarding agent never waits itself).
			waitCtx, stopWaiting := context.WithDeadline(lctx, deadline)
			defer stopWaiting()
			// The dispatcher answers a re-sent request id from state, or
			// with the leases a held earlier delivery gets.
			if got, err = a.prop.Claim(waitCtx, w, waitMargin/2); err != nil {
				return rpc.ClaimResult{}, err
			}
		} else if got, err = a.claimReady(ctx, w); err != nil {
			return rpc.ClaimResult{}, err
		}
		out := rpc.ClaimResult{Tasks: make([]rpc.Claimed, 0, len(got))}
		ids := make([]string, 0, len(got))
		for _, c := range got {
			out.Tasks = append(out.Tasks, toClaimed(c))
			ids = append(ids, c.TaskID)
		}
		a.workers.assigned(p.WorkerID, ids)
		a.metrics.claimed.Add(float64(len(got)))
		return out, nil
	})
	if err != nil && fwdCtx.Err() != nil && ctx.Err() == nil {
		// We stopped waiting because the client's input ended (it went
		// away, half-closed, or this agent is draining it to stop) and the
		// claim did not come back with its outcome, which a half-close
		// normally brings (callExclusive; the dispatcher's grace here): the
		// forward was cut (leadership moved, this agent left the cluster)
		// or the claim entry did not settle in time, so tasks may have been
		// leased to this request id. A client still reading (half-closed,
		// or drained by a stopping agent) must not be told "no tasks": it
		// would forget the request id and those leases would sit with
		// nobody until they expire. Outcome unknown: re-send.
		return rpc.ClaimResult{}, true, &domain.UnavailableError{Reason: "this agent stopped waiting for the claim's outcome " +
			"(its client's input ended first); the outcome is unknown: re-send it with the same request id",
			RetryAfter: 50 * time.Millisecond}
	}
	return res, err != nil && (errors.Is(err, domain.ErrUnavailable) || errors.Is(err, rpc.ErrClosed) || ctx.Err() != nil), err
}

// claimReady is a claim without a wait: a re-sent request id gets the
// leases its first delivery made (nothing proposed), otherwise one claim
// entry if anything is ready, else nothing.
func (a *Agent) claimReady(ctx context.Context, w fsm.Waiter) ([]fsm.Claimed, error) {
	got, err := a.state.ClaimedBy(w.WorkerID, w.RequestID)
	if err != nil || len(got) > 0 {
		return got, err
	}
	if !a.state.HasReady(w, max(time.Now().UnixMilli(), a.state.Now())) {
		return nil, nil
	}
	res, idx, err := propose[fsm.ClaimResult](ctx, a.prop, &fsm.Claim{Waiters: []fsm.Waiter{w}}, grouped)
	if err != nil {
		return nil, err
	}
	if len(res.Assigned) != 1 {
		return nil, fmt.Errorf("%w: the claim at index %d answered for %d waiters, want 1", ErrUnexpectedResult, idx, len(res.Assigned))
	}
	return res.Assigned[0], nil
}

func (a *Agent) taskHeartbeat(ctx context.Context, p rpc.HeartbeatParams) (rpc.AckResult, error) {
	if p.TaskID == "" {
		return rpc.AckResult{}, invalid("task_id is required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodTaskHeartbeat, asSent(ctx, rpc.MethodTaskHeartbeat, p), func(ctx context.Context) (rpc.AckResult, error) {
		ack, idx, err := propose[fsm.AckResult](ctx, a.prop, &fsm.Heartbeat{TaskID: p.TaskID, Token: p.FencingToken, Log: logChunk(p.LogParams)}, grouped)
		if err != nil {
			return rpc.AckResult{}, err
		}
		if ack.Accepted {
			a.workers.heartbeat(p.TaskID)
		}
		return rpc.AckResult{Accepted: ack.Accepted, LeaseExpiresAt: ms(ack.LeaseExpiresAt), Index: idx}, nil
	})
}

func (a *Agent) taskComplete(ctx context.Context, p rpc.CompleteParams) (rpc.AckResult, error) {
	if p.TaskID == "" {
		return rpc.AckResult{}, invalid("task_id is required")
	}
	if n := len(p.Result); n > a.state.Limits().MaxResultBytes {
		return rpc.AckResult{}, tooLarge("result of %d bytes exceeds the limit of %d; store large outputs elsewhere and return a reference", n, a.state.Limits().MaxResultBytes)
	}
	spawn, err := domain.ParseTaskSpecs(p.Spawn, "spawn")
	if err != nil {
		return rpc.AckResult{}, err
	}
	if err := fsm.SpecNeedsVersion(domain.Spec{Tasks: spawn}, a.state.ActiveVersion()); err != nil {
		return rpc.AckResult{}, err // a release before V2 refuses these fields as unknown
	}
	var next *fsm.Waiter
	var fills []fill // what a follower adds to the params its client sent
	if p.Claim != nil {
		sent := p.Claim.RequestID
		if err := checkClaim(p.Claim); err != nil {
			return rpc.AckResult{}, err
		}
		if p.Claim.RequestID != sent {
			fills = append(fills, fill{in: "claim", name: "request_id", value: p.Claim.RequestID})
		}
		if p.Claim.WaitMS != 0 {
			return rpc.AckResult{}, invalid("claim.wait_ms must be 0: task.complete claims only what is ready; long-poll with task.claim")
		}
		next = &fsm.Waiter{WorkerID: p.Claim.WorkerID, Queues: p.Claim.Queues, Types: p.Claim.Types, Max: p.Claim.Max, RequestID: p.Claim.RequestID}
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodTaskComplete, asSent(ctx, rpc.MethodTaskComplete, p, fills...), func(ctx context.Context) (rpc.AckResult, error) {
		if p.Claim != nil {
			a.workers.claimed(*p.Claim, a.cfg.NodeID, a.prop.LeaderEpoch())
		}
		ack, idx, err := propose[fsm.AckResult](ctx, a.prop, &fsm.Complete{TaskID: p.TaskID, Token: p.FencingToken, Result: p.Result, Spawn: spawn, Claim: next, Log: logChunk(p.LogParams)}, grouped)
		if err != nil {
			return rpc.AckResult{}, err
		}
		if ack.Accepted {
			a.metrics.completed.Inc()
		}
		out := rpc.AckResult{Accepted: ack.Accepted, Index: idx}
		if len(ack.Claimed) > 0 {
			out.Tasks = make([]rpc.Claimed, 0, len(ack.Claimed))
			ids := make([]string, 0, len(ack.Claimed))
			for _, c := range ack.Claimed {
				out.Tasks = append(out.Tasks, toClaimed(c))
				ids = append(ids, c.TaskID)
			}
			a.workers.assigned(next.WorkerID, ids)
			a.metrics.claimed.Add(float64(len(ack.Claimed)))
		}
		return out, nil
	})
}

func (a *Agent) taskFail(ctx context.Context, p rpc.FailParams) (rpc.AckResult, error) {
	if p.TaskID == "" {
		return rpc.AckResult{}, invalid("task_id is required")
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodTaskFail, asSent(ctx, rpc.MethodTaskFail, p), func(ctx context.Context) (rpc.AckResult, error) {
		ack, idx, err := propose[fsm.AckResult](ctx, a.prop, &fsm.Fail{TaskID: p.TaskID, Token: p.FencingToken, Error: p.Error, Retryable: p.Retryable, Log: logChunk(p.LogParams)}, grouped)
		if err != nil {
			return rpc.AckResult{}, err
		}
		if ack.Accepted {
			a.metrics.failed.Inc()
		}
		return rpc.AckResult{Accepted: ack.Accepted, Index: idx}, nil
	})
}

func tooLarge(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{domain.ErrTooLarge}, args...)...)
}
