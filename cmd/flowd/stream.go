package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/rpc"
)

// eventStream follows events.subscribe across reconnects. Subscriptions
// belong to a connection, so the client's OnConnect hook subscribes again
// on every new connection, from the last index received (events of one
// index are told apart by seq, and duplicates are dropped by (index, seq):
// every node holds the same replicated event window).
//
// rpc.Client only reconnects when a call is made, so the owner of the
// stream keeps a call going (run.wait, or a cluster.status keepalive);
// when the connection dies, that call fails over and the new connection
// re-subscribes.
type eventStream struct {
	c      *rpc.Client
	ctx    context.Context
	ready  chan struct{} // closed by start: OnConnect waits for the parameters
	events chan rpc.Event
	errs   chan error

	mu      sync.Mutex
	runID   string
	from    uint64 // where the stream starts (0: the next applied index)
	seen    bool
	lastIdx uint64
	lastSeq uint32
	failed  bool
}

// newEventStream returns a stream and its client. The client connects on
// its first call; the subscription is made once start is called.
func newEventStream(cCtx *cli.Context) (*eventStream, error) {
	s := &eventStream{ctx: cCtx.Context, ready: make(chan struct{}), events: make(chan rpc.Event, 256), errs: make(chan error, 1)}
	c, err := newClient(cCtx, func(o *rpc.ClientOptions) { o.OnConnect = s.onConnect })
	if err != nil {
		return nil, err
	}
	s.c = c
	c.OnNotify(s.onNotify)
	return s, nil
}

// start sets what to follow and lets subscriptions begin.
func (s *eventStream) start(runID string, from uint64) {
	s.mu.Lock()
	s.runID, s.from = runID, from
	s.mu.Unlock()
	close(s.ready)
}

func (s *eventStream) close() { s.c.Close() }

func (s *eventStream) fail(err error) {
	s.mu.Lock()
	already := s.failed
	s.failed = true
	s.mu.Unlock()
	if !already {
		s.errs <- err
	}
}

func (s *eventStream) onConnect(string) {
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	p := rpc.SubscribeParams{RunID: s.runID, FromIndex: s.from}
	if s.seen {
		p.FromIndex = s.lastIdx // its later events (higher seq) may not have arrived
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	res, err := s.c.EventsSubscribe(ctx, p)
	if err != nil {
		if pe, ok := errors.AsType[*rpc.Error](err); ok && pe.Code != rpc.CodeUnavailable && s.ctx.Err() == nil {
			s.fail(err) // e.g. not_found: no such run
		}
		return // a connection error: the next connection subscribes again
	}
	s.mu.Lock()
	if !s.seen && s.from == 0 {
		s.from = res.FromIndex
	}
	s.mu.Unlock()
}

func (s *eventStream) onNotify(method string, params json.RawMessage) {
	switch method {
	case rpc.NotifyEvent:
		var ev rpc.Event
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		s.mu.Lock()
		if s.seen && (ev.Index < s.lastIdx || (ev.Index == s.lastIdx && ev.Seq <= s.lastSeq)) {
			s.mu.Unlock()
			return
		}
		s.seen, s.lastIdx, s.lastSeq = true, ev.Index, ev.Seq
		s.mu.Unlock()
		select {
		case s.events <- ev:
		case <-s.ctx.Done():
		}
	case daemon.NotifyEventsLost:
		var lost struct {
			OldestIndex uint64 `json:"oldest_index"`
			Message     string `json:"message"`
		}
		_ = json.Unmarshal(params, &lost)
		s.fail(failf(fmt.Sprintf("the stream fell behind the agents' event window; continue with `flowd events --follow --from %d`", lost.OldestIndex),
			"events lost: %s", lost.Message))
	}
}

// last returns the position of the last event received.
func (s *eventStream) last() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastIdx, s.seen
}

// keepalive makes a cheap call every interval so a lost connection is
// noticed and replaced (and the stream re-subscribed). The first call
// connects at once.
func (s *eventStream) keepalive(ctx context.Context, interval time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.c.ClusterStatus(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			if pe, ok := errors.AsType[*rpc.Error](err); ok && pe.Code != rpc.CodeUnavailable {
				s.fail(err)
				return
			}
		}
		t.Reset(interval)
	}
}

// eventLine formats one event on one line; withRun shows which run a task
// belongs to.
func eventLine(e rpc.Event, withRun bool) string {
	var subject string
	switch e.Kind {
	case "run":
		subject = "run " + shortID(e.RunID)
	case "task", "log": // a log event: the task stored log lines
		subject = "task " + e.TaskKey
		if withRun {
			subject = "task " + shortTaskID(e.RunID, e.TaskKey)
		}
	case "compensation":
		subject = "revert " + e.TaskKey
		if withRun {
			subject = "revert " + shortTaskID(e.RunID, e.TaskKey)
		}
	case "queue":
		subject = "queue " + e.Name
		if e.RunID != "" {
			subject += " run " + shortID(e.RunID)
		}
	case "breaker":
		subject = "breaker " + e.Name
	default:
		subject = e.Kind
		if e.Name != "" {
			subject += " " + e.Name
		}
	}
	change := e.Transition
	if e.From != "" || e.To != "" {
		change = fmt.Sprintf("%-22s %s → %s", e.Transition, dash(e.From), StateLabel(e.To))
	}
	var extra []string
	if e.Attempt > 0 {
		extra = append(extra, fmt.Sprintf("attempt %d", e.Attempt))
	}
	if e.Worker != "" {
		extra = append(extra, "worker "+e.Worker)
	}
	if e.Error != "" {
		extra = append(extra, "error: "+oneLine(e.Error, 120))
	}
	tail := ""
	if len(extra) > 0 {
		tail = "  (" + strings.Join(extra, ", ") + ")"
	}
	return fmt.Sprintf("%s %8d  %-28s %s%s", e.At.UTC().Format("2006-01-02T15:04:05.000Z"), e.Index, subject, change, tail)
}

// printEvent writes an event as a line, or as one compact JSON object per
// line with --output json.
func printEvent(cCtx *cli.Context, e rpc.Event, withRun bool) {
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		e.Subscription = ""
		b, _ := json.Marshal(e)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintln(w, eventLine(e, withRun))
}
