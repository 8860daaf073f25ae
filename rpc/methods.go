package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
)

// Typed methods over Client. Calls that are safe to repeat (reads, and
// writes made idempotent by an id, a fencing token or a claim request id)
// are retried across a failover. A claim always carries a request id, so a
// re-sent claim is answered the leases its lost first answer held instead
// of leasing more.

// call makes one typed call.
func call[R any](ctx context.Context, do func(context.Context, string, any, any) error, method string, params any) (*R, error) {
	var out R
	err := do(ctx, method, params, &out)
	return &out, err
}

// idempotentIf picks CallIdempotent when the call names what it creates
// (so repeating it cannot create it twice), Call otherwise.
func (c *Client) idempotentIf(named bool) func(context.Context, string, any, any) error {
	if named {
		return c.CallIdempotent
	}
	return c.Call
}

// Hello checks the protocol version; a mismatch is an error telling the
// user what to upgrade.
func (c *Client) Hello(ctx context.Context, client string) (*HelloResult, error) {
	var out HelloResult
	if err := c.CallIdempotent(ctx, MethodHello, HelloParams{ProtocolVersion: ProtocolVersion, Client: client}, &out); err != nil {
		return nil, err
	}
	if out.ProtocolVersion != ProtocolVersion {
		return &out, fmt.Errorf("protocol mismatch: agent %s speaks version %d, this client speaks %d; upgrade the older side",
			out.NodeID, out.ProtocolVersion, ProtocolVersion)
	}
	return &out, nil
}

// RunSubmit submits a workflow. p.ID should be set (a UUIDv7) so a retry after
// a failover cannot create the run twice; the CLI and SDK always set it.
// The call's retries share one nonce (picked here unless set), so the
// call that created the run learns it did even when a retry answers.
func (c *Client) RunSubmit(ctx context.Context, p SubmitParams) (*SubmitResult, error) {
	if p.Nonce == "" {
		p.Nonce = NewRequestID()
	}
	return call[SubmitResult](ctx, c.idempotentIf(p.ID != ""), MethodRunSubmit, p)
}

// NewRequestID names one call for its retries (claim request ids, submit
// nonces): 64 random bits, short in the records.
func NewRequestID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// RunGet returns a run with its tasks.
func (c *Client) RunGet(ctx context.Context, id string) (*Run, error) {
	return call[Run](ctx, c.CallIdempotent, MethodRunGet, IDParams{ID: id})
}

// RunList lists runs newest first.
func (c *Client) RunList(ctx context.Context, p ListParams) (*ListResult, error) {
	return call[ListResult](ctx, c.CallIdempotent, MethodRunList, p)
}

// RunWait blocks until the run is done or timeoutMS passes.
func (c *Client) RunWait(ctx context.Context, id string, timeoutMS int64) (*WaitResult, error) {
	return call[WaitResult](ctx, c.CallIdempotent, MethodRunWait, WaitParams{ID: id, TimeoutMS: timeoutMS})
}

// RunVerb calls run.cancel, run.interrupt, run.resume or run.revert.
func (c *Client) RunVerb(ctx context.Context, method, id, reason string) (*ChangedResult, error) {
	return call[ChangedResult](ctx, c.CallIdempotent, method, VerbParams{ID: id, Reason: reason})
}

// RunReplay starts a new run from a run's frozen spec.
func (c *Client) RunReplay(ctx context.Context, p ReplayParams) (*SubmitResult, error) {
	return call[SubmitResult](ctx, c.idempotentIf(p.NewID != ""), MethodRunReplay, p)
}

// RunStats returns per-task timing of a run.
func (c *Client) RunStats(ctx context.Context, id string) (*RunStats, error) {
	return call[RunStats](ctx, c.CallIdempotent, MethodRunStats, IDParams{ID: id})
}

// TaskGet returns one task with its attempt history.
func (c *Client) TaskGet(ctx context.Context, id string) (*Task, error) {
	return call[Task](ctx, c.CallIdempotent, MethodTaskGet, TaskIDParams{ID: id})
}

// TaskClaim long-polls for tasks. A claim whose answer was lost with its
// connection is sent again (on the new leader after a failover): it carries
// a request id (picked here unless set), and a re-sent claim gets the tasks
// the first delivery leased, not more. A -32004 answer (no leader within
// the wait) is returned: the caller's loop backs off and claims again.
//
// An error other than a definite answer (-32004, a lost connection, the
// caller's deadline) leaves the claim's outcome unknown: the leader may
// have leased tasks whose answer never arrived (a forwarding agent cut off
// from the leader, a claim entry that committed after the wait). Then the
// worker's next Claim with the same worker, queues and types and at least
// the same max, and no request id of its own, re-sends that request id: it
// is answered those leases if they are still held, and claims afresh
// otherwise. Without it they would sit leased to nobody until they expire.
func (c *Client) TaskClaim(ctx context.Context, p ClaimParams) ([]Claimed, error) {
	picked := p.RequestID == ""
	if picked {
		p.RequestID = c.unknown.Take(p)
	}
	var out ClaimResult
	err := c.CallResendable(ctx, MethodTaskClaim, p, &out)
	var pe *Error
	if err != nil && picked && !(errors.As(err, &pe) && pe.Code != CodeUnavailable) {
		c.unknown.Keep(p)
	}
	return out.Tasks, err
}

// ClaimMemo remembers, per worker id, the last claim whose outcome is
// unknown, so that the worker's next claim re-sends its request id and is
// answered the leases it may have made (see Client.Claim; an agent keeps
// one for clients that send no request id). Its zero value is ready.
type ClaimMemo struct {
	mu sync.Mutex
	m  map[string]ClaimParams
}

// Keep remembers p (its RequestID set) as its worker's claim of unknown
// outcome.
func (m *ClaimMemo) Keep(p ClaimParams) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]ClaimParams{}
	} else if len(m.m) >= 1024 {
		clear(m.m) // bounded: a client serving many worker ids forgets
	}
	m.m[p.WorkerID] = p
}

// Take returns the request id to send with p: the kept one of p's worker
// if p asks for the same queues and types and at least as many tasks (so
// the leases it is answered fit), else a fresh one. The kept one is used
// once.
func (m *ClaimMemo) Take(p ClaimParams) string {
	m.mu.Lock()
	old, ok := m.m[p.WorkerID]
	delete(m.m, p.WorkerID)
	m.mu.Unlock()
	if ok && slices.Equal(old.Queues, p.Queues) && slices.Equal(old.Types, p.Types) && max(p.Max, 1) >= max(old.Max, 1) {
		return old.RequestID
	}
	return NewRequestID()
}

// TaskHeartbeat extends a lease; Accepted false means the lease is lost.
func (c *Client) TaskHeartbeat(ctx context.Context, taskID string, token uint64) (*AckResult, error) {
	return call[AckResult](ctx, c.CallIdempotent, MethodTaskHeartbeat, HeartbeatParams{TaskID: taskID, FencingToken: token})
}

// TaskComplete records a task's result; Accepted false means the token is stale.
func (c *Client) TaskComplete(ctx context.Context, p CompleteParams) (*AckResult, error) {
	return call[AckResult](ctx, c.CallIdempotent, MethodTaskComplete, p)
}

// TaskCompleteAndClaim records a task's success and claims p.Claim's next
// tasks in the same entry (AckResult.Tasks). Like Complete it is retried
// after an unknown outcome: the completion is idempotent by its token and
// the claim by its request id (picked here unless set), so a retry is
// answered the tasks the first delivery leased.
func (c *Client) TaskCompleteAndClaim(ctx context.Context, p CompleteParams) (*AckResult, error) {
	if p.Claim != nil && p.Claim.RequestID == "" {
		cl := *p.Claim
		cl.RequestID = NewRequestID()
		p.Claim = &cl
	}
	return call[AckResult](ctx, c.CallIdempotent, MethodTaskComplete, p)
}

// TaskFail records a failed attempt; Accepted false means the token is stale.
func (c *Client) TaskFail(ctx context.Context, p FailParams) (*AckResult, error) {
	return call[AckResult](ctx, c.CallIdempotent, MethodTaskFail, p)
}

// ClusterStatus returns the connected node's view of the cluster.
func (c *Client) ClusterStatus(ctx context.Context) (*ClusterStatus, error) {
	return call[ClusterStatus](ctx, c.CallIdempotent, MethodClusterStatus, struct{}{})
}

// ClusterStats returns cluster-wide statistics.
func (c *Client) ClusterStats(ctx context.Context) (*ClusterStats, error) {
	return call[ClusterStats](ctx, c.CallIdempotent, MethodClusterStats, struct{}{})
}

// ClusterDigest returns the connected node's state digest and applied index.
func (c *Client) ClusterDigest(ctx context.Context) (*DigestResult, error) {
	return call[DigestResult](ctx, c.CallIdempotent, MethodClusterDigest, struct{}{})
}

// EventsList lists retained events.
func (c *Client) EventsList(ctx context.Context, p EventsListParams) (*EventsListResult, error) {
	return call[EventsListResult](ctx, c.CallIdempotent, MethodEventsList, p)
}

// EventsSubscribe starts an event stream on the current connection; events
// arrive through OnNotify as NotifyEvent. After a reconnect the caller must
// subscribe again (from the last index it saw + 1).
func (c *Client) EventsSubscribe(ctx context.Context, p SubscribeParams) (*SubscribeResult, error) {
	return call[SubscribeResult](ctx, c.Call, MethodEventsSubscribe, p)
}

// QueueList lists queues and breakers.
func (c *Client) QueueList(ctx context.Context) (*QueueListResult, error) {
	return call[QueueListResult](ctx, c.CallIdempotent, MethodQueueList, struct{}{})
}

// QueuePause pauses (pause=true) or resumes a queue, globally or for a run.
func (c *Client) QueuePause(ctx context.Context, name, runID string, pause bool) (*ChangedResult, error) {
	var out ChangedResult
	m := MethodQueueResume
	if pause {
		m = MethodQueuePause
	}
	return &out, c.CallIdempotent(ctx, m, QueuePauseParams{Name: name, RunID: runID}, &out)
}

// QueueSet sets a queue's concurrency cap (0 = unlimited).
func (c *Client) QueueSet(ctx context.Context, name string, concurrency int) (*ChangedResult, error) {
	return call[ChangedResult](ctx, c.CallIdempotent, MethodQueueSet, QueueSetParams{Name: name, Concurrency: concurrency})
}

// QueueDelete forgets a queue with no ready or running task.
func (c *Client) QueueDelete(ctx context.Context, name string) (*ChangedResult, error) {
	return call[ChangedResult](ctx, c.CallIdempotent, MethodQueueDelete, QueueDeleteParams{Name: name})
}

// SettingsGet returns the replicated settings.
func (c *Client) SettingsGet(ctx context.Context) (*Settings, error) {
	return call[Settings](ctx, c.CallIdempotent, MethodSettingsGet, struct{}{})
}

// SettingsSet changes the given settings and returns all of them.
func (c *Client) SettingsSet(ctx context.Context, s Settings) (*Settings, error) {
	return call[Settings](ctx, c.CallIdempotent, MethodSettingsSet, s)
}

// WorkersList lists the workers the leader has seen recently.
func (c *Client) WorkersList(ctx context.Context) (*WorkersResult, error) {
	return call[WorkersResult](ctx, c.CallIdempotent, MethodWorkersList, struct{}{})
}

// Raw calls any method with raw JSON params (flowd rpc).
func (c *Client) Raw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	var out json.RawMessage
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return out, c.Call(ctx, method, params, &out)
}

// LeaderBound reports whether method runs on the leader (a follower
// forwards it): writes, long polls, workers.list and the operator writes.
// An unknown method is not leader-bound: it goes to the current
// connection, whose agent forwards it if it must.
func LeaderBound(method string) bool { return methodRoutes[method] == routeLeader }

// classify is a call's route class (methodtable.go): the method's, except
// that a consistent read (run.get, run.list) with consistent: true runs on
// the leader.
func classify(method string, params any) routeClass {
	spec := methodByName[method] // unknown: routeLocal, no flags
	class := spec.route
	if spec.Flags&FlagConsistent != 0 {
		switch p := params.(type) {
		case IDParams:
			class = consistentRoute(p.Consistent)
		case *IDParams:
			class = consistentRoute(p != nil && p.Consistent)
		case ListParams:
			class = consistentRoute(p.Consistent)
		case *ListParams:
			class = consistentRoute(p != nil && p.Consistent)
		}
	}
	return class
}

func consistentRoute(consistent bool) routeClass {
	if consistent {
		return routeLeader
	}
	return routeRead
}
