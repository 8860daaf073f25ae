package daemon

import (
	"context"
	"errors"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Event streams. Every node keeps the same bounded event window (events are
// replicated state), so a subscriber that loses its agent resumes from
// another at the next index it has not seen. Within a subscription events
// arrive in (index, seq) order, each exactly once; a subscriber that falls
// behind the window gets an "events.lost" notification and the stream ends.

// NotifyEventsLost ends a stream that fell behind the retained window.
const NotifyEventsLost = "events.lost"

const streamBatch = 500

// eventReader is the event window the streams and events.list read.
type eventReader interface {
	Events(from uint64, runID string, limit int) ([]fsm.Event, uint64, error)
	LatestEvents(runID string, limit int) ([]fsm.Event, error)
}

func (a *Agent) eventsSubscribe(ctx context.Context, p rpc.SubscribeParams) (rpc.SubscribeResult, error) {
	runID := ""
	if p.RunID != "" {
		id, err := a.resolve(p.RunID)
		if err != nil {
			return rpc.SubscribeResult{}, err
		}
		runID = id
	}
	from := p.FromIndex
	if from == 0 {
		from = a.state.AppliedIndex() + 1
	}
	if _, _, err := a.state.Events(from, runID, 1); err != nil {
		return rpc.SubscribeResult{}, err
	}
	// Subscription ids are random and belong to their connection: another
	// connection cannot guess or end them, and each connection may hold at
	// most MaxSubscriptions streams.
	conn := rpc.ConnID(ctx)
	id := a.cfg.NodeID + "-" + rpc.NewRequestID() + rpc.NewRequestID()
	key := subKey{conn: conn, id: id}
	a.mu.Lock()
	if max := a.cfg.MaxSubscriptions; max > 0 && a.subsPerConn[conn] >= max {
		a.mu.Unlock()
		return rpc.SubscribeResult{}, invalid("this connection already has %d event subscriptions (the limit); "+
			"unsubscribe one (events.unsubscribe) or use another connection", max)
	}
	a.subsPerConn[conn]++
	a.mu.Unlock()
	release := func() {
		a.mu.Lock()
		delete(a.subs, key)
		if a.subsPerConn[conn]--; a.subsPerConn[conn] <= 0 {
			delete(a.subsPerConn, conn)
		}
		a.mu.Unlock()
	}
	err := rpc.Spawn(ctx, func(connCtx context.Context) {
		sctx, cancel := context.WithCancel(connCtx)
		a.mu.Lock()
		a.subs[key] = cancel
		a.mu.Unlock()
		defer func() {
			cancel()
			release()
		}()
		a.stream(sctx, id, from, runID)
	})
	if err != nil {
		release()
		return rpc.SubscribeResult{}, err
	}
	return rpc.SubscribeResult{Subscription: id, FromIndex: from}, nil
}

// stream pushes events from index from on, woken by commits.
func (a *Agent) stream(ctx context.Context, id string, from uint64, runID string) {
	var lastIdx uint64
	lastSeq := int64(-1)
	next := from
	for {
		changed := a.state.Changed()
		evs, oldest, err := a.state.Events(next, runID, streamBatch)
		if errors.Is(err, fsm.ErrEventsTrimmed) {
			_ = rpc.Notify(ctx, NotifyEventsLost, map[string]any{"subscription": id, "oldest_index": oldest,
				"message": err.Error() + "; subscribe again from a retained index (events.list shows them)"})
			return
		}
		if err != nil {
			a.log.Warn("event stream", "subscription", id, "err", err)
			return
		}
		for _, e := range evs {
			if e.Index < lastIdx || (e.Index == lastIdx && int64(e.Seq) <= lastSeq) {
				continue
			}
			ev := toEvent(e)
			ev.Subscription = id
			if err := rpc.Notify(ctx, rpc.NotifyEvent, ev); err != nil {
				return
			}
			lastIdx, lastSeq = e.Index, int64(e.Seq)
		}
		if len(evs) > 0 {
			next = lastIdx
		}
		if len(evs) == streamBatch {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// subKey names a subscription within its connection.
type subKey struct {
	conn any // rpc.ConnID
	id   string
}

func (a *Agent) eventsUnsubscribe(ctx context.Context, p struct {
	Subscription string `json:"subscription"`
}) (rpc.ChangedResult, error) {
	a.mu.Lock()
	cancel, ok := a.subs[subKey{conn: rpc.ConnID(ctx), id: p.Subscription}]
	a.mu.Unlock()
	if ok {
		cancel()
	}
	return rpc.ChangedResult{Changed: ok}, nil
}

func (a *Agent) eventsList(_ context.Context, p rpc.EventsListParams) (rpc.EventsListResult, error) {
	runID := ""
	if p.RunID != "" {
		id, err := a.resolve(p.RunID)
		if err != nil {
			return rpc.EventsListResult{}, err
		}
		runID = id
	}
	limit := p.Limit
	if limit <= 0 || limit > 10_000 {
		limit = 1000
	}
	var evs []fsm.Event
	var oldest uint64
	var err error
	if p.Latest {
		evs, err = a.state.LatestEvents(runID, limit)
		if err == nil {
			_, oldest, err = a.state.Events(0, "", 1)
		}
	} else {
		evs, oldest, err = a.state.Events(p.FromIndex, runID, limit)
	}
	if err != nil {
		return rpc.EventsListResult{}, err
	}
	out := rpc.EventsListResult{Events: make([]rpc.Event, 0, len(evs)), OldestIndex: oldest}
	for _, e := range evs {
		out.Events = append(out.Events, toEvent(e))
	}
	return out, nil
}
