package rpc

import (
	"context"
	"time"
)

// Task logs (docs/rpc.md, "Task logs"): a heartbeat, complete or fail may
// carry the lines the task printed since the last call (LogParams); the
// cluster keeps them per attempt, up to a cap, and task.logs reads them.

// Log streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	StreamLog    = "log"
	// StreamFlowd is the stream of the lines flowd writes itself (the
	// truncation marker).
	StreamFlowd = "flowd"
)

// LogLine is one line of a task's log. At is the worker's clock in ms
// since the epoch.
type LogLine struct {
	At     int64  `json:"at"`
	Stream string `json:"stream"`
	Line   string `json:"line"`
}

// LogParams are the optional log fields of task.heartbeat, task.complete
// and task.fail. Absent, the call carries no log (and costs nothing more).
type LogParams struct {
	// Logs are the lines printed since the last accepted call.
	Logs []LogLine `json:"logs,omitempty"`
	// LogsSeq is the attempt's line number of Logs[0] (from 0): a call
	// re-sent after an unknown outcome then stores its lines once. Absent,
	// the lines follow those the attempt has.
	LogsSeq *int `json:"logs_seq,omitempty"`
	// LogsDropped counts lines that followed Logs and were not sent (the
	// worker's own cap); they count in the truncation marker.
	LogsDropped int `json:"logs_dropped,omitempty"`
}

// TaskLogsParams of task.logs. Run is a run id (or a unique part of one);
// Attempt 0 reads every attempt, n only attempt n (Compensation: the revert
// handler's attempt n). Cursor continues a previous read; WaitMS > 0 waits
// up to that long for lines after the cursor when there are none yet and
// the task may still log (follow).
type TaskLogsParams struct {
	Run          string `json:"run"`
	Key          string `json:"key"`
	Attempt      int    `json:"attempt,omitempty"`
	Compensation bool   `json:"compensation,omitempty"`
	Cursor       string `json:"cursor,omitempty"`
	WaitMS       int64  `json:"wait_ms,omitempty"`
}

// AttemptLog is one attempt and the lines of it the read returned.
type AttemptLog struct {
	Attempt      int       `json:"attempt"`
	Compensation bool      `json:"compensation,omitempty"`
	Worker       string    `json:"worker"`
	FencingToken uint64    `json:"fencing_token"`
	Outcome      string    `json:"outcome"`
	ClaimedAt    time.Time `json:"claimed_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	// LinesTotal lines were received for the attempt, LinesStored kept
	// (Bytes of them); the rest were dropped past the cap.
	LinesTotal  int       `json:"lines_total"`
	LinesStored int       `json:"lines_stored"`
	Bytes       int       `json:"bytes"`
	Lines       []LogLine `json:"lines"`
}

// TaskLogsResult of task.logs. Cursor continues the read; More: a bound
// was reached, read again at once; Done: the task is finished and no
// attempt can add lines (a follower stops).
type TaskLogsResult struct {
	TaskID   string       `json:"task_id"`
	State    string       `json:"state"`
	Attempts []AttemptLog `json:"attempts"`
	Cursor   string       `json:"cursor"`
	More     bool         `json:"more,omitempty"`
	Done     bool         `json:"done"`
}

// TaskLogs reads a task's logs (see TaskLogsParams).
func (c *Client) TaskLogs(ctx context.Context, p TaskLogsParams) (*TaskLogsResult, error) {
	return call[TaskLogsResult](ctx, c.CallIdempotent, MethodTaskLogs, p)
}

// TaskHeartbeatWith extends a lease like Heartbeat, with the params' logs.
func (c *Client) TaskHeartbeatWith(ctx context.Context, p HeartbeatParams) (*AckResult, error) {
	return call[AckResult](ctx, c.CallIdempotent, MethodTaskHeartbeat, p)
}

// MaxAttemptLogBytes is how many bytes of log lines the cluster keeps per
// attempt (the rest is dropped and counted in a marker line); the worker
// SDK stops sending there. MaxLogLineBytes bounds one line (cut longer).
const (
	MaxAttemptLogBytes = 64 << 10
	MaxLogLineBytes    = 4 << 10
)
