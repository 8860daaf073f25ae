package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Task logs: the log fields of heartbeat, complete and fail become the
// command's fsm.LogChunk; task.logs reads them, waiting for new lines when
// asked to follow.

// logReader is the FSM's log read (an addition to stateReader kept here, so
// fakes of the seam need not implement it).
type logReader interface {
	TaskLogs(run, key string, attempt int, compensation bool, after fsm.LogCursor, maxBytes int) (*fsm.LogPage, error)
}

// maxLogCallLines bounds the lines one call may carry; past it (or past an
// attempt's whole cap in bytes) the rest are counted as dropped, so an
// oversized call neither fails nor grows the raft entry.
const maxLogCallLines = 4096

// logReadBytes bounds the lines one task.logs answer carries (More: read on).
const logReadBytes = 1 << 20

// logChunk turns a call's log fields into the command's chunk; nil when the
// call carries none (the hot path: nothing more is encoded).
func logChunk(p rpc.LogParams) *fsm.LogChunk {
	if len(p.Logs) == 0 && p.LogsDropped <= 0 {
		return nil
	}
	c := &fsm.LogChunk{Seq: p.LogsSeq, Dropped: max(p.LogsDropped, 0)}
	size := 0
	for i, l := range p.Logs {
		size += min(len(l.Line), fsm.MaxLogLineBytes)
		if i == maxLogCallLines || size > fsm.MaxAttemptLogBytes {
			c.Dropped += len(p.Logs) - i
			break
		}
		c.Lines = append(c.Lines, fsm.LogLine{At: l.At, Stream: l.Stream, Line: l.Line})
	}
	return c
}

func (a *Agent) taskLogs(ctx context.Context, p rpc.TaskLogsParams) (rpc.TaskLogsResult, error) {
	if p.Run == "" || p.Key == "" {
		return rpc.TaskLogsResult{}, invalid("run and key are required (e.g. {\"run\":\"3f9a1c2b7d4e\",\"key\":\"extract\"})")
	}
	if p.Attempt < 0 || p.WaitMS < 0 {
		return rpc.TaskLogsResult{}, invalid("attempt and wait_ms must be >= 0")
	}
	lr, ok := a.state.(logReader)
	if !ok {
		return rpc.TaskLogsResult{}, fmt.Errorf("this agent's state keeps no task logs")
	}
	run, err := a.resolve(p.Run)
	if err != nil {
		return rpc.TaskLogsResult{}, err
	}
	after, err := fsm.ParseLogCursor(p.Cursor)
	if err != nil {
		return rpc.TaskLogsResult{}, err
	}
	wait := clampMS(p.WaitMS, MaxWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := a.state.Changed()
		page, err := lr.TaskLogs(run, p.Key, p.Attempt, p.Compensation, after, logReadBytes)
		if err != nil {
			return rpc.TaskLogsResult{}, err
		}
		out := toTaskLogs(page)
		if wait <= 0 || out.Done || out.Cursor != after.String() {
			return out, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
}

func toTaskLogs(p *fsm.LogPage) rpc.TaskLogsResult {
	t := p.Task
	out := rpc.TaskLogsResult{TaskID: t.ID(), State: string(t.State), Cursor: p.Cursor, More: p.More,
		Done: t.State.Done() && !t.Leased(), Attempts: make([]rpc.AttemptLog, 0, len(p.Attempts))}
	for _, at := range p.Attempts {
		lines := make([]rpc.LogLine, len(at.Lines))
		for i, l := range at.Lines {
			lines[i] = rpc.LogLine{At: l.At, Stream: l.Stream, Line: l.Line}
		}
		out.Attempts = append(out.Attempts, rpc.AttemptLog{Attempt: at.N, Compensation: at.Compensation, Worker: at.Worker,
			FencingToken: at.Token, Outcome: at.Outcome, ClaimedAt: ms(at.ClaimedAt), EndedAt: ms(at.EndedAt),
			LinesTotal: at.LogLines, LinesStored: at.LogStored, Bytes: at.LogBytes, Lines: lines})
	}
	return out
}
