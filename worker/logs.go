package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/flowd/flowd/rpc"
)

// Task logs. A handler's lines (Log, Logf, Logger, LogWriter) are buffered
// per attempt and sent with the task's heartbeats (one goes out at most
// LogFlush after a line while lines wait) and with its completion or
// failure; `flowd task logs` and the TUI show them. An attempt keeps at
// most rpc.MaxAttemptLogBytes of lines: the SDK stops sending there and
// the cluster adds a marker line saying how many were dropped.

// DefaultLogFlush is Options.LogFlush's default.
const DefaultLogFlush = time.Second

// Log adds a line to the attempt's log, formatted like fmt.Sprintln (spaces
// between operands, as testing.T.Log does); text with newlines becomes
// several lines.
func (t *Task) Log(args ...any) { t.log.add(rpc.StreamLog, fmt.Sprintln(args...)) }

// Logf adds a formatted line to the attempt's log.
func (t *Task) Logf(format string, args ...any) {
	t.log.add(rpc.StreamLog, fmt.Sprintf(format, args...))
}

// Logger returns a structured logger whose records go to the attempt's log
// (text format: level, message, attributes; the line carries the time).
func (t *Task) Logger() *slog.Logger { return slog.New(t.LogHandler(nil)) }

// LogHandler returns a slog.Handler bound to the attempt's log.
func (t *Task) LogHandler(opts *slog.HandlerOptions) slog.Handler {
	o := slog.HandlerOptions{}
	if opts != nil {
		o = *opts
	}
	inner := o.ReplaceAttr
	o.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{} // each line carries its time
		}
		if inner != nil {
			return inner(groups, a)
		}
		return a
	}
	return slog.NewTextHandler(t.LogWriter(rpc.StreamLog), &o)
}

// LogWriter returns a writer whose lines go to the attempt's log under
// stream ("stdout", "stderr" or "log"); a last line without a newline is
// added when the handler returns.
func (t *Task) LogWriter(stream string) io.Writer {
	w := &lineWriter{log: &t.log, stream: stream}
	t.log.mu.Lock()
	t.log.writers = append(t.log.writers, w)
	t.log.mu.Unlock()
	return w
}

// taskLog is an attempt's log on its way to the cluster: pending lines
// start at line number seq; total counts every line the handler wrote.
type taskLog struct {
	mu      sync.Mutex
	pending []rpc.LogLine
	seq     int  // line number of pending[0]
	total   int  // lines written, dropped ones included
	bytes   int  // bytes of the lines kept (sent or pending)
	full    bool // the cap was reached: every later line is dropped
	writers []*lineWriter
	wake    chan struct{} // signalled when lines start waiting
}

func (l *taskLog) add(stream, text string) {
	now := time.Now().UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l.addLocked(now, stream, strings.TrimRight(line, "\r"))
	}
}

func (l *taskLog) addLocked(at int64, stream, line string) {
	l.total++
	if l.full {
		return
	}
	if len(line) > rpc.MaxLogLineBytes {
		cut := rpc.MaxLogLineBytes
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	if l.bytes+len(line) > rpc.MaxAttemptLogBytes {
		l.full = true
		return
	}
	l.bytes += len(line)
	l.pending = append(l.pending, rpc.LogLine{At: at, Stream: stream, Line: line})
	if len(l.pending) == 1 && l.wake != nil {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// take returns what the next call carries (nil when nothing) and the line
// count it reports up to.
func (l *taskLog) take() (rpc.LogParams, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sent := l.seq + len(l.pending)
	if l.total == l.seq && len(l.pending) == 0 {
		return rpc.LogParams{}, l.total
	}
	seq := l.seq
	return rpc.LogParams{Logs: append([]rpc.LogLine(nil), l.pending...), LogsSeq: &seq, LogsDropped: l.total - sent}, l.total
}

// acked drops what an accepted call carried (up to line number upto).
func (l *taskLog) acked(p rpc.LogParams, upto int) {
	if p.LogsSeq == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(p.Logs), len(l.pending))
	l.pending = l.pending[n:]
	l.seq += n
	if len(l.pending) == 0 {
		l.seq = upto // dropped lines are reported: the next call starts after them
	}
}

// flushWriters adds the writers' last unterminated lines.
func (l *taskLog) flushWriters() {
	l.mu.Lock()
	ws := l.writers
	l.mu.Unlock()
	for _, w := range ws {
		w.flush()
	}
}

// lineWriter splits what is written into lines of one stream. A line
// longer than rpc.MaxLogLineBytes is kept truncated: its first
// MaxLogLineBytes bytes (cut at a rune boundary) and "…"; the rest, up to
// its newline, is dropped. So every kept line is a prefix of a line
// written, whatever sizes the writes came in.
type lineWriter struct {
	log    *taskLog
	stream string
	mu     sync.Mutex
	buf    []byte
	// skip: the current line was cut and emitted; drop up to its newline.
	skip bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if w.skip {
			if i < 0 {
				break // still inside the cut line
			}
			w.skip = false
			rest = rest[i+1:]
			continue
		}
		if i < 0 {
			w.buf = append(w.buf, rest...)
			break
		}
		w.buf = append(w.buf, rest[:i]...)
		w.emit(w.buf)
		w.buf = w.buf[:0]
		rest = rest[i+1:]
	}
	if len(w.buf) > rpc.MaxLogLineBytes { // a very long line: keep its head now
		w.emit(w.buf)
		w.buf = w.buf[:0]
		w.skip = true
	}
	return len(p), nil
}

func (w *lineWriter) emit(b []byte) {
	line := strings.TrimRight(string(b), "\r")
	at := time.Now().UnixMilli()
	w.log.mu.Lock()
	w.log.addLocked(at, w.stream, line)
	w.log.mu.Unlock()
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
	w.skip = false
}

// sendHeartbeat sends a heartbeat with the pending lines; lost: the
// cluster says the lease is gone.
func (w *Worker) sendHeartbeat(ctx context.Context, t *Task, timeout time.Duration) (lost bool) {
	lp, upto := t.log.take()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	ack, err := w.c.TaskHeartbeatWith(hctx, rpc.HeartbeatParams{TaskID: t.ID, FencingToken: t.FencingToken, LogParams: lp})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("heartbeat failed; will retry", "task", t.ID, "err", err)
		}
		return false
	}
	if !ack.Accepted {
		return true
	}
	t.log.acked(lp, upto)
	return false
}
