package rpc

import "context"

// The client's methods are named Noun+Verb, as the protocol's noun.verb
// (RunGet for run.get). The names below are the ones they had before; they
// stay one release for programs outside this module that call them.

// Deprecated: the old names of MethodEventsSubscribe and
// MethodSnapshotRestore; they go in the next release.
const (
	MethodEventsSub    = MethodEventsSubscribe
	MethodSnapshotRest = MethodSnapshotRestore
)

// ACLTokens is ACLTokenList.
//
// Deprecated: use ACLTokenList; ACLTokens goes in the next release.
func (c *Client) ACLTokens(ctx context.Context) (*ACLTokenListResult, error) {
	return c.ACLTokenList(ctx)
}

// Claim is TaskClaim.
//
// Deprecated: use TaskClaim; Claim goes in the next release.
func (c *Client) Claim(ctx context.Context, p ClaimParams) ([]Claimed, error) {
	return c.TaskClaim(ctx, p)
}

// Complete is TaskComplete.
//
// Deprecated: use TaskComplete; Complete goes in the next release.
func (c *Client) Complete(ctx context.Context, p CompleteParams) (*AckResult, error) {
	return c.TaskComplete(ctx, p)
}

// CompleteAndClaim is TaskCompleteAndClaim.
//
// Deprecated: use TaskCompleteAndClaim; CompleteAndClaim goes in the next release.
func (c *Client) CompleteAndClaim(ctx context.Context, p CompleteParams) (*AckResult, error) {
	return c.TaskCompleteAndClaim(ctx, p)
}

// Digest is ClusterDigest.
//
// Deprecated: use ClusterDigest; Digest goes in the next release.
func (c *Client) Digest(ctx context.Context) (*DigestResult, error) {
	return c.ClusterDigest(ctx)
}

// Events is EventsList.
//
// Deprecated: use EventsList; Events goes in the next release.
func (c *Client) Events(ctx context.Context, p EventsListParams) (*EventsListResult, error) {
	return c.EventsList(ctx, p)
}

// Fail is TaskFail.
//
// Deprecated: use TaskFail; Fail goes in the next release.
func (c *Client) Fail(ctx context.Context, p FailParams) (*AckResult, error) {
	return c.TaskFail(ctx, p)
}

// GetRun is RunGet.
//
// Deprecated: use RunGet; GetRun goes in the next release.
func (c *Client) GetRun(ctx context.Context, id string) (*Run, error) {
	return c.RunGet(ctx, id)
}

// GetTask is TaskGet.
//
// Deprecated: use TaskGet; GetTask goes in the next release.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	return c.TaskGet(ctx, id)
}

// Heartbeat is TaskHeartbeat.
//
// Deprecated: use TaskHeartbeat; Heartbeat goes in the next release.
func (c *Client) Heartbeat(ctx context.Context, taskID string, token uint64) (*AckResult, error) {
	return c.TaskHeartbeat(ctx, taskID, token)
}

// HeartbeatWith is TaskHeartbeatWith.
//
// Deprecated: use TaskHeartbeatWith; HeartbeatWith goes in the next release.
func (c *Client) HeartbeatWith(ctx context.Context, p HeartbeatParams) (*AckResult, error) {
	return c.TaskHeartbeatWith(ctx, p)
}

// ListRuns is RunList.
//
// Deprecated: use RunList; ListRuns goes in the next release.
func (c *Client) ListRuns(ctx context.Context, p ListParams) (*ListResult, error) {
	return c.RunList(ctx, p)
}

// Queues is QueueList.
//
// Deprecated: use QueueList; Queues goes in the next release.
func (c *Client) Queues(ctx context.Context) (*QueueListResult, error) {
	return c.QueueList(ctx)
}

// Replay is RunReplay.
//
// Deprecated: use RunReplay; Replay goes in the next release.
func (c *Client) Replay(ctx context.Context, p ReplayParams) (*SubmitResult, error) {
	return c.RunReplay(ctx, p)
}

// SetSettings is SettingsSet.
//
// Deprecated: use SettingsSet; SetSettings goes in the next release.
func (c *Client) SetSettings(ctx context.Context, s Settings) (*Settings, error) {
	return c.SettingsSet(ctx, s)
}

// Settings is SettingsGet.
//
// Deprecated: use SettingsGet; Settings goes in the next release.
func (c *Client) Settings(ctx context.Context) (*Settings, error) {
	return c.SettingsGet(ctx)
}

// Stats is ClusterStats.
//
// Deprecated: use ClusterStats; Stats goes in the next release.
func (c *Client) Stats(ctx context.Context) (*ClusterStats, error) {
	return c.ClusterStats(ctx)
}

// Status is ClusterStatus.
//
// Deprecated: use ClusterStatus; Status goes in the next release.
func (c *Client) Status(ctx context.Context) (*ClusterStatus, error) {
	return c.ClusterStatus(ctx)
}

// Submit is RunSubmit.
//
// Deprecated: use RunSubmit; Submit goes in the next release.
func (c *Client) Submit(ctx context.Context, p SubmitParams) (*SubmitResult, error) {
	return c.RunSubmit(ctx, p)
}

// Subscribe is EventsSubscribe.
//
// Deprecated: use EventsSubscribe; Subscribe goes in the next release.
func (c *Client) Subscribe(ctx context.Context, p SubscribeParams) (*SubscribeResult, error) {
	return c.EventsSubscribe(ctx, p)
}

// WaitRun is RunWait.
//
// Deprecated: use RunWait; WaitRun goes in the next release.
func (c *Client) WaitRun(ctx context.Context, id string, timeoutMS int64) (*WaitResult, error) {
	return c.RunWait(ctx, id, timeoutMS)
}

// Workers is WorkersList.
//
// Deprecated: use WorkersList; Workers goes in the next release.
func (c *Client) Workers(ctx context.Context) (*WorkersResult, error) {
	return c.WorkersList(ctx)
}

// ListTasks is TaskList.
//
// Deprecated: use TaskList; ListTasks goes in the next release.
func (c *Client) ListTasks(ctx context.Context, p TaskListParams) (*TaskListResult, error) {
	return c.TaskList(ctx, p)
}

// RetryRun is RunRetry.
//
// Deprecated: use RunRetry; RetryRun goes in the next release.
func (c *Client) RetryRun(ctx context.Context, p RetryParams) (*RetryResult, error) {
	return c.RunRetry(ctx, p)
}
