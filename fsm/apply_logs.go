package fsm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Task logs: lines a task printed or logged, carried by the heartbeat,
// complete or fail that the worker sends anyway (no command of their own)
// and stored per attempt under keys of their own, so the task record that
// every claim and completion rewrites does not grow with them:
//
//	tl/<run>/<key>/<token8><chunk4>   one chunk of an attempt's log (JSON array of LogLine)
//
// The attempt (Attempt.Log*) counts what was received and stored. A chunk
// is stored only when its call is accepted as the live attempt's (the same
// fencing check as the call it rides on), so a stale attempt's logs are
// rejected with it. Each attempt keeps at most MaxAttemptLogBytes of lines;
// what comes after is dropped, and when the attempt ends a marker line says
// how many lines were dropped. The keys go with their run when retention
// deletes it.

// MaxAttemptLogBytes bounds the log lines one attempt keeps.
const MaxAttemptLogBytes = 64 << 10

// MaxLogLineBytes bounds one log line; a longer one is cut (marked "…").
const MaxLogLineBytes = 4 << 10

// Log streams. StreamFlowd is the stream of the lines flowd itself writes
// (the truncation marker).
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	StreamLog    = "log"
	StreamFlowd  = "flowd"
)

var pfxTaskLog = []byte("tl/")

// LogLine is one line of a task's log. At is the worker's clock (ms since
// the epoch): informative only, Apply never reads it as time.
type LogLine struct {
	At     int64  `json:"at"`
	Stream string `json:"stream"`
	Line   string `json:"line"`
}

// LogChunk is the log a heartbeat, complete or fail carries.
type LogChunk struct {
	Lines []LogLine `json:"lines,omitempty"`
	// Seq, if set, is the attempt's line number of Lines[0] (from 0): a
	// call re-sent after an unknown outcome stores its lines once. Unset,
	// the lines follow what the attempt has.
	Seq *int `json:"seq,omitempty"`
	// Dropped lines followed Lines and were not sent (the worker's own cap,
	// or lines the agent cut from an oversized call).
	Dropped int `json:"dropped,omitempty"`
}

func (c *LogChunk) empty() bool { return c == nil || (len(c.Lines) == 0 && c.Dropped == 0) }

func taskLogRunPrefix(run string) []byte { return cat(pfxTaskLog, []byte(run), []byte("/")) }

func taskLogPrefix(run, key string) []byte {
	return cat(pfxTaskLog, []byte(run), []byte("/"), []byte(key), []byte("/"))
}

func taskLogKey(run, key string, token uint64, chunk uint32) []byte {
	return cat(taskLogPrefix(run, key), u64(token), u32(chunk))
}

// appendLogs stores c as the next chunk of t's live attempt. Call it only
// after the call's token was found current (and not timed out). It never
// fails: what does not fit is counted as dropped.
func (a *applier) appendLogs(t *Task, c *LogChunk) {
	n := len(t.Attempts)
	if c.empty() || n == 0 || t.Attempts[n-1].Outcome != OutcomeRunning {
		return
	}
	at := &t.Attempts[n-1]
	seq := at.LogLines
	if c.Seq != nil && *c.Seq >= 0 {
		seq = *c.Seq
	}
	lines := c.Lines
	if skip := at.LogLines - seq; skip > 0 { // re-sent: the first skip lines are stored
		lines = lines[min(skip, len(lines)):]
		seq = at.LogLines
	}
	if seq > at.LogLines {
		// Lines the worker never sent: the stored log stays a prefix of
		// the attempt's lines, so nothing after a gap is stored.
		at.LogLines = seq
	}
	var keep []LogLine
	for _, l := range lines {
		at.LogLines++
		if at.LogStored < at.LogLines-1 {
			continue // something was dropped before: the rest is dropped too
		}
		l = cleanLine(l)
		if at.LogBytes+len(l.Line) > MaxAttemptLogBytes {
			continue
		}
		at.LogBytes += len(l.Line)
		at.LogStored++
		keep = append(keep, l)
	}
	at.LogLines += max(c.Dropped, 0)
	if len(keep) == 0 {
		return
	}
	a.put(taskLogKey(t.RunID, t.Key, at.Token, uint32(at.LogChunks)), keep)
	at.LogChunks++
	a.emit(Event{Kind: "log", RunID: t.RunID, TaskKey: t.Key, Transition: "log", Attempt: at.N, Worker: at.Worker})
}

// sealLogs ends the log of the attempt that is ending: if lines were
// dropped, a last chunk says how many.
func (a *applier) sealLogs(t *Task, at *Attempt) {
	dropped := at.LogLines - at.LogStored
	if dropped <= 0 {
		return
	}
	line := LogLine{At: a.now, Stream: StreamFlowd, Line: fmt.Sprintf(
		"[flowd] log truncated: %d more line(s) dropped (an attempt keeps at most %d KiB of log)", dropped, MaxAttemptLogBytes>>10)}
	a.put(taskLogKey(t.RunID, t.Key, at.Token, uint32(at.LogChunks)), []LogLine{line})
	at.LogChunks++
}

// deleteRunLogs removes the log chunks of a run's tasks (retention).
func (a *applier) deleteRunLogs(runID string, tasks []*Task) {
	has := false
	for _, t := range tasks {
		for _, at := range t.Attempts {
			has = has || at.LogChunks > 0
		}
	}
	if !has {
		return // the usual case: no scan
	}
	pfx := taskLogRunPrefix(runID)
	var keys [][]byte
	must(a.tx.Scan(pfx, nil, false, func(k, _ []byte) bool {
		keys = append(keys, append([]byte(nil), k...))
		return true
	}))
	for _, k := range keys {
		a.del(k)
	}
}

// cleanLine bounds a line, keeps it valid UTF-8 and on one line, and names
// an unknown stream "log".
func cleanLine(l LogLine) LogLine {
	switch l.Stream {
	case StreamStdout, StreamStderr, StreamLog:
	default:
		l.Stream = StreamLog
	}
	s := strings.TrimRight(l.Line, "\r\n")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) > MaxLogLineBytes {
		cut := MaxLogLineBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	l.Line = s
	return l
}

// AttemptLog is one attempt's stored log as task.logs reads it.
type AttemptLog struct {
	Attempt
	Lines []LogLine
}

// LogPage is a read of a task's logs: the attempts in order (all, or the
// one asked for) with the lines after the cursor.
type LogPage struct {
	Task     *Task
	Attempts []AttemptLog
	// Cursor is where the next read continues (pass it back as after).
	Cursor string
	More   bool // the byte bound was reached: read again at once
}

// LogCursor is a position in a task's log: the next chunk to read.
type LogCursor struct {
	Token uint64
	Chunk uint32
}

// String renders the cursor for the protocol ("<token>.<chunk>").
func (c LogCursor) String() string { return fmt.Sprintf("%d.%d", c.Token, c.Chunk) }

// ParseLogCursor reads a cursor rendered by String ("" is the start).
func ParseLogCursor(s string) (LogCursor, error) {
	var c LogCursor
	if s == "" {
		return c, nil
	}
	if _, err := fmt.Sscanf(s, "%d.%d", &c.Token, &c.Chunk); err != nil {
		return c, fmt.Errorf("%w: cursor %q: pass back the cursor of the previous answer", ErrInvalidArgument, s)
	}
	return c, nil
}

// TaskLogs reads the logs of task key of run: every attempt (attempt 0) or
// attempt number n (compensation: the revert handler's attempt n), lines
// after cursor, at most maxBytes of lines (at least one chunk).
func (f *FSM) TaskLogs(run, key string, n int, compensation bool, after LogCursor, maxBytes int) (*LogPage, error) {
	page := &LogPage{}
	err := f.View(func(r Reader) error {
		t, err := getJSON[Task](r, taskKey(run, key))
		if err != nil {
			return err
		}
		if t == nil {
			return fmt.Errorf("%w: task %s/%s", ErrNotFound, run, key)
		}
		page.Task = t
		tokens := map[uint64]int{} // token -> index in page.Attempts
		for _, at := range t.Attempts {
			if n != 0 && (at.N != n || at.Compensation != compensation) {
				continue
			}
			tokens[at.Token] = len(page.Attempts)
			page.Attempts = append(page.Attempts, AttemptLog{Attempt: at})
		}
		if n != 0 && len(page.Attempts) == 0 {
			what := "attempt"
			if compensation {
				what = "compensation attempt"
			}
			return fmt.Errorf("%w: task %s/%s has no %s %d (it has %d attempt(s); `flowd task get %s/%s` lists them)",
				ErrNotFound, run, key, what, n, len(t.Attempts), run, key)
		}
		cur := after
		pfx := taskLogPrefix(run, key)
		bytes := 0
		err = r.Scan(pfx, cat(pfx, u64(after.Token), u32(after.Chunk)), false, func(k, v []byte) bool {
			if len(k) != len(pfx)+12 {
				return true
			}
			token := binary.BigEndian.Uint64(k[len(pfx):])
			chunk := binary.BigEndian.Uint32(k[len(pfx)+8:])
			if bytes >= maxBytes && bytes > 0 {
				page.More = true
				return false
			}
			cur = LogCursor{Token: token, Chunk: chunk + 1}
			i, ok := tokens[token]
			if !ok {
				return true // another attempt than the one asked for
			}
			var lines []LogLine
			if err = unmarshal(v, &lines); err != nil {
				return false
			}
			for _, l := range lines {
				bytes += len(l.Line)
			}
			page.Attempts[i].Lines = append(page.Attempts[i].Lines, lines...)
			return true
		})
		page.Cursor = cur.String()
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}
