package fsm

import (
	"bytes"
	"strings"
	"testing"
)

// Semantics of task logs: stored per attempt under their own keys, only
// with an accepted call, at most MaxAttemptLogBytes per attempt, deleted
// with the run.

const logSpec = `{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":3,"initial_backoff_ms":1}}]}`

func lines(stream string, texts ...string) []LogLine {
	out := make([]LogLine, len(texts))
	for i, s := range texts {
		out[i] = LogLine{At: int64(i), Stream: stream, Line: s}
	}
	return out
}

func (h *harness) logs(run, key string, n int) *LogPage {
	h.t.Helper()
	p, err := h.f.TaskLogs(run, key, n, false, LogCursor{}, 1<<20)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func texts(ls []LogLine) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Stream+":"+l.Line)
	}
	return strings.Join(out, "|")
}

func countKeys(t *testing.T, f *FSM, prefix []byte) int {
	t.Helper()
	n := 0
	if err := f.View(func(r Reader) error {
		return r.Scan(prefix, nil, false, func(_, _ []byte) bool { n++; return true })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLogsRideOnHeartbeatAndCompletionPerAttempt(t *testing.T) {
	h := newSem(t)
	h.submit("r", logSpec)
	c1 := h.claimOne("w")
	if !h.ok(&Heartbeat{TaskID: c1.TaskID, Token: c1.FencingToken, Log: &LogChunk{Lines: lines("stdout", "one", "two")}}).(*AckResult).Accepted {
		t.Fatal("heartbeat with logs rejected")
	}
	// Re-sent after an unknown outcome (same seq): stored once; the next
	// line follows.
	zero := 0
	h.ok(&Heartbeat{TaskID: c1.TaskID, Token: c1.FencingToken, Log: &LogChunk{Seq: &zero, Lines: lines("stdout", "one", "two", "three")}})
	h.ok(&Fail{TaskID: c1.TaskID, Token: c1.FencingToken, Error: "boom", Log: &LogChunk{Lines: lines("stderr", "bad\n")}})
	// A stale attempt's logs are rejected with its call.
	if h.ok(&Heartbeat{TaskID: c1.TaskID, Token: c1.FencingToken, Log: &LogChunk{Lines: lines("stdout", "late")}}).(*AckResult).Accepted {
		t.Fatal("stale heartbeat accepted")
	}
	h.now += 10
	h.ok(&Tick{})
	c2 := h.claimOne("w")
	before := stateDigest(t, h.f)
	h.ok(&Complete{TaskID: c1.TaskID, Token: c1.FencingToken, Log: &LogChunk{Lines: lines("stdout", "stale")}})
	if stateDigest(t, h.f) != before {
		t.Fatal("a stale completion with logs changed the state")
	}
	h.ok(&Complete{TaskID: c2.TaskID, Token: c2.FencingToken, Log: &LogChunk{Lines: lines("log", "done")}})

	p := h.logs("r", "a", 0)
	if len(p.Attempts) != 2 {
		t.Fatalf("attempts %+v", p.Attempts)
	}
	if got := texts(p.Attempts[0].Lines); got != "stdout:one|stdout:two|stdout:three|stderr:bad" {
		t.Fatalf("attempt 1 log %q", got)
	}
	if got := texts(p.Attempts[1].Lines); got != "log:done" {
		t.Fatalf("attempt 2 log %q", got)
	}
	if a := p.Attempts[0].Attempt; a.LogLines != 4 || a.LogStored != 4 || a.LogChunks != 3 {
		t.Fatalf("attempt 1 counts %+v", a)
	}
	if got := texts(h.logs("r", "a", 2).Attempts[0].Lines); got != "log:done" {
		t.Fatalf("attempt 2 alone: %q", got)
	}
	if _, err := h.f.TaskLogs("r", "a", 3, false, LogCursor{}, 1<<20); err == nil {
		t.Fatal("attempt 3 read without error")
	}
	if !hasTransition(runEvents(h, "r"), "log", "a", "log") {
		t.Fatal("no log event")
	}
}

func TestLogsWithoutLinesWriteNothing(t *testing.T) {
	h := newSem(t)
	h.submit("r", logSpec)
	c := h.claimOne("w")
	h.heartbeat(c)
	h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken, Log: &LogChunk{}})
	h.complete(c, "1")
	if n := countKeys(t, h.f, pfxTaskLog); n != 0 {
		t.Fatalf("%d log keys without logs", n)
	}
	tk := h.task("r", "a")
	if b, _ := marshal(tk); bytes.Contains(b, []byte("log_")) {
		t.Fatalf("task record mentions logs: %s", b)
	}
}

func TestLogsAreCappedPerAttemptWithAMarker(t *testing.T) {
	h := newSem(t)
	h.submit("r", logSpec)
	c := h.claimOne("w")
	big := strings.Repeat("x", 1000)
	var ls []LogLine
	for range 100 { // 100 KB: 65 fit
		ls = append(ls, LogLine{Stream: "stdout", Line: big})
	}
	h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken, Log: &LogChunk{Lines: ls}})
	// After the cap nothing more is stored, even a short line; the
	// worker's own drops count too.
	h.ok(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Log: &LogChunk{Lines: lines("stdout", "short"), Dropped: 4}})
	p := h.logs("r", "a", 1)
	got := p.Attempts[0].Lines
	if len(got) != 66 {
		t.Fatalf("%d lines stored, want 65 and the marker", len(got))
	}
	stored := 0
	for _, l := range got[:65] {
		stored += len(l.Line)
	}
	if stored > MaxAttemptLogBytes {
		t.Fatalf("stored %d bytes", stored)
	}
	m := got[65]
	if m.Stream != StreamFlowd || !strings.Contains(m.Line, "40 more line(s) dropped") {
		t.Fatalf("marker %+v", m)
	}
	// A long line is cut; an unknown stream becomes log.
	if l := cleanLine(LogLine{Stream: "weird", Line: strings.Repeat("é", MaxLogLineBytes)}); len(l.Line) > MaxLogLineBytes+len("…") || l.Stream != StreamLog {
		t.Fatalf("line of %d bytes, stream %s", len(l.Line), l.Stream)
	}
}

func TestLogCursorFollowsNewChunks(t *testing.T) {
	h := newSem(t)
	h.submit("r", logSpec)
	c := h.claimOne("w")
	h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken, Log: &LogChunk{Lines: lines("stdout", "a", "b")}})
	p1 := h.logs("r", "a", 0)
	cur, err := ParseLogCursor(p1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	h.ok(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Log: &LogChunk{Lines: lines("stdout", "c")}})
	p2, err := h.f.TaskLogs("r", "a", 0, false, cur, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(p2.Attempts[0].Lines); got != "stdout:c" {
		t.Fatalf("after the cursor: %q", got)
	}
	p3, _ := h.f.TaskLogs("r", "a", 0, false, mustCursor(t, p2.Cursor), 1<<20)
	if len(p3.Attempts[0].Lines) != 0 || p3.Cursor != p2.Cursor {
		t.Fatalf("at the end: %+v cursor %s", p3.Attempts, p3.Cursor)
	}
	// A small byte bound pages by chunk.
	p4, _ := h.f.TaskLogs("r", "a", 0, false, LogCursor{}, 1)
	if !p4.More || texts(p4.Attempts[0].Lines) != "stdout:a|stdout:b" {
		t.Fatalf("bounded page %+v", p4)
	}
}

func mustCursor(t *testing.T, s string) LogCursor {
	t.Helper()
	c, err := ParseLogCursor(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLogsAreDeletedWithTheRun(t *testing.T) {
	h := newSem(t)
	h.submit("r", logSpec)
	h.submit("keep", logSpec)
	for range 2 {
		c := h.claimOne("w")
		h.ok(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Log: &LogChunk{Lines: lines("stdout", "hi")}})
	}
	if n := countKeys(t, h.f, pfxTaskLog); n != 2 {
		t.Fatalf("%d log keys, want 2", n)
	}
	h.ok(&SettingsSet{RetentionMS: ptr(int64(1000))})
	h.now += 2000
	if n := h.ok(&GC{}).(*CountResult).Count; n != 2 {
		t.Fatalf("gc removed %d runs", n)
	}
	if n := countKeys(t, h.f, pfxTaskLog); n != 0 {
		t.Fatalf("%d log keys left after the runs were deleted", n)
	}
}
