package raftnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes raft's hclog output into slog, so an agent has one
// structured log stream. raft's info chatter is kept at info; its trace at
// slog debug-4.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level hclog.Level
	rep   *repeats // shared by the loggers With and Named derive
}

// NewHCLogger returns an hclog.Logger writing to l.
func NewHCLogger(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l, name: name, level: hclog.Info, rep: &repeats{last: map[string]*repeat{}}}
}

// A peer that is down makes raft log a failed heartbeat or append to it
// several times a second, at error level, for as long as it is down. Those
// messages (peerContactMsgs) are logged as warnings, once per peer and
// message every repeatEvery, with the count of the ones left out.
var peerContactMsgs = []string{"failed to appendEntries to", "failed to heartbeat to",
	"failed to make requestVote RPC", "failed to contact", "failed to decode incoming command"}

const repeatEvery = 10 * time.Second

type repeats struct {
	mu   sync.Mutex
	last map[string]*repeat
}

type repeat struct {
	at         time.Time
	suppressed int
}

// allow reports whether key may be logged now, and how many were left out
// since it last was.
func (r *repeats) allow(key string, now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.last[key]
	if x == nil {
		if len(r.last) > 1024 {
			clear(r.last) // bounded: peers come and go
		}
		r.last[key] = &repeat{at: now}
		return true, 0
	}
	if now.Sub(x.at) < repeatEvery {
		x.suppressed++
		return false, 0
	}
	n := x.suppressed
	x.at, x.suppressed = now, 0
	return true, n
}

func peerContact(msg string) bool {
	for _, m := range peerContactMsgs {
		if strings.HasPrefix(msg, m) {
			return true
		}
	}
	return false
}

// peerOf finds the peer a raft message is about in its key/value args.
func peerOf(args []any) string {
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "peer", "target", "from":
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn && h.rep != nil && peerContact(msg) {
		level = hclog.Warn // a peer that is down is an operating condition, not a fault of this node
		ok, n := h.rep.allow(msg+"|"+peerOf(args), time.Now())
		if !ok {
			return
		}
		if n > 0 {
			args = append(args[:len(args):len(args)], "repeated", n)
		}
	}
	if level < h.level || !h.l.Enabled(context.Background(), toSlog(level)) {
		return
	}
	all := make([]any, 0, len(h.args)+len(args)+2)
	if h.name != "" {
		all = append(all, "component", h.name)
	}
	all = append(all, h.args...)
	all = append(all, args...)
	h.l.Log(context.Background(), toSlog(level), msg, all...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *hclogAdapter) IsTrace() bool                 { return h.level <= hclog.Trace }
func (h *hclogAdapter) IsDebug() bool                 { return h.level <= hclog.Debug }
func (h *hclogAdapter) IsInfo() bool                  { return h.level <= hclog.Info }
func (h *hclogAdapter) IsWarn() bool                  { return h.level <= hclog.Warn }
func (h *hclogAdapter) IsError() bool                 { return h.level <= hclog.Error }
func (h *hclogAdapter) ImpliedArgs() []any            { return h.args }
func (h *hclogAdapter) Name() string                  { return h.name }
func (h *hclogAdapter) SetLevel(l hclog.Level)        { h.level = l }
func (h *hclogAdapter) GetLevel() hclog.Level         { return h.level }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		line := strings.TrimSpace(string(p))
		level := hclog.Info
		for _, l := range []struct {
			tag string
			lv  hclog.Level
		}{{"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}, {"[WARN]", hclog.Warn}, {"[DEBUG]", hclog.Debug}, {"[TRACE]", hclog.Trace}} {
			if strings.Contains(line, l.tag) {
				level = l.lv
				break
			}
		}
		h.Log(level, line)
		return len(p), nil
	})
}

type writerFunc func(p []byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
