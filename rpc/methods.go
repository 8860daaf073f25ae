package rpc

import (
	"context"
	"encoding/json"
	"fmt"
)

// Typed methods over Client. Calls that are safe to repeat (reads, and
// writes made idempotent by an id or a fencing token) are retried across a
// failover; a claim is retried only when it certainly was not sent, because
// a lost claim reply leases tasks nobody runs (they come back when the
// lease expires).

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

// Submit submits a workflow. p.ID should be set (a UUIDv7) so a retry after
// a failover cannot create the run twice; the CLI and SDK always set it.
func (c *Client) Submit(ctx context.Context, p SubmitParams) (*SubmitResult, error) {
	var out SubmitResult
	call := c.Call
	if p.ID != "" {
		call = c.CallIdempotent
	}
	return &out, call(ctx, MethodRunSubmit, p, &out)
}

// GetRun returns a run with its tasks.
func (c *Client) GetRun(ctx context.Context, id string) (*Run, error) {
	var out Run
	return &out, c.CallIdempotent(ctx, MethodRunGet, IDParams{ID: id}, &out)
}

// ListRuns lists runs newest first.
func (c *Client) ListRuns(ctx context.Context, p ListParams) (*ListResult, error) {
	var out ListResult
	return &out, c.CallIdempotent(ctx, MethodRunList, p, &out)
}

// WaitRun blocks until the run is done or timeoutMS passes.
func (c *Client) WaitRun(ctx context.Context, id string, timeoutMS int64) (*WaitResult, error) {
	var out WaitResult
	return &out, c.CallIdempotent(ctx, MethodRunWait, WaitParams{ID: id, TimeoutMS: timeoutMS}, &out)
}

// RunVerb calls run.cancel, run.interrupt, run.resume or run.revert.
func (c *Client) RunVerb(ctx context.Context, method, id, reason string) (*ChangedResult, error) {
	var out ChangedResult
	return &out, c.CallIdempotent(ctx, method, VerbParams{ID: id, Reason: reason}, &out)
}

// Replay starts a new run from a run's frozen spec.
func (c *Client) Replay(ctx context.Context, p ReplayParams) (*SubmitResult, error) {
	var out SubmitResult
	call := c.Call
	if p.NewID != "" {
		call = c.CallIdempotent
	}
	return &out, call(ctx, MethodRunReplay, p, &out)
}

// RunStats returns per-task timing of a run.
func (c *Client) RunStats(ctx context.Context, id string) (*RunStats, error) {
	var out RunStats
	return &out, c.CallIdempotent(ctx, MethodRunStats, IDParams{ID: id}, &out)
}

// GetTask returns one task with its attempt history.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	var out Task
	return &out, c.CallIdempotent(ctx, MethodTaskGet, TaskIDParams{ID: id}, &out)
}

// Claim long-polls for tasks.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]Claimed, error) {
	var out ClaimResult
	return out.Tasks, c.Call(ctx, MethodTaskClaim, p, &out)
}

// Heartbeat extends a lease; Accepted false means the lease is lost.
func (c *Client) Heartbeat(ctx context.Context, taskID string, token uint64) (*AckResult, error) {
	var out AckResult
	return &out, c.CallIdempotent(ctx, MethodTaskHeartbeat, HeartbeatParams{TaskID: taskID, FencingToken: token}, &out)
}

// Complete records a task's result; Accepted false means the token is stale.
func (c *Client) Complete(ctx context.Context, p CompleteParams) (*AckResult, error) {
	var out AckResult
	return &out, c.CallIdempotent(ctx, MethodTaskComplete, p, &out)
}

// Fail records a failed attempt; Accepted false means the token is stale.
func (c *Client) Fail(ctx context.Context, p FailParams) (*AckResult, error) {
	var out AckResult
	return &out, c.CallIdempotent(ctx, MethodTaskFail, p, &out)
}

// Status returns the connected node's view of the cluster.
func (c *Client) Status(ctx context.Context) (*ClusterStatus, error) {
	var out ClusterStatus
	return &out, c.CallIdempotent(ctx, MethodClusterStatus, struct{}{}, &out)
}

// Stats returns cluster-wide statistics.
func (c *Client) Stats(ctx context.Context) (*ClusterStats, error) {
	var out ClusterStats
	return &out, c.CallIdempotent(ctx, MethodClusterStats, struct{}{}, &out)
}

// Digest returns the connected node's state digest and applied index.
func (c *Client) Digest(ctx context.Context) (*DigestResult, error) {
	var out DigestResult
	return &out, c.CallIdempotent(ctx, MethodClusterDigest, struct{}{}, &out)
}

// Events lists retained events.
func (c *Client) Events(ctx context.Context, p EventsListParams) (*EventsListResult, error) {
	var out EventsListResult
	return &out, c.CallIdempotent(ctx, MethodEventsList, p, &out)
}

// Subscribe starts an event stream on the current connection; events
// arrive through OnNotify as NotifyEvent. After a reconnect the caller must
// subscribe again (from the last index it saw + 1).
func (c *Client) Subscribe(ctx context.Context, p SubscribeParams) (*SubscribeResult, error) {
	var out SubscribeResult
	return &out, c.Call(ctx, MethodEventsSub, p, &out)
}

// Queues lists queues and breakers.
func (c *Client) Queues(ctx context.Context) (*QueueListResult, error) {
	var out QueueListResult
	return &out, c.CallIdempotent(ctx, MethodQueueList, struct{}{}, &out)
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
	var out ChangedResult
	return &out, c.CallIdempotent(ctx, MethodQueueSet, QueueSetParams{Name: name, Concurrency: concurrency}, &out)
}

// Settings returns the replicated settings.
func (c *Client) Settings(ctx context.Context) (*Settings, error) {
	var out Settings
	return &out, c.CallIdempotent(ctx, MethodSettingsGet, struct{}{}, &out)
}

// SetSettings changes the given settings and returns all of them.
func (c *Client) SetSettings(ctx context.Context, s Settings) (*Settings, error) {
	var out Settings
	return &out, c.CallIdempotent(ctx, MethodSettingsSet, s, &out)
}

// Workers lists the workers the leader has seen recently.
func (c *Client) Workers(ctx context.Context) (*WorkersResult, error) {
	var out WorkersResult
	return &out, c.CallIdempotent(ctx, MethodWorkersList, struct{}{}, &out)
}

// Raw calls any method with raw JSON params (flowd rpc).
func (c *Client) Raw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	var out json.RawMessage
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return out, c.Call(ctx, method, params, &out)
}
