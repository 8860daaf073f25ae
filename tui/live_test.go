package tui

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// The connection manager against in-memory agents (net.Pipe, no sockets):
// failover to the next endpoint after a lost connection, resuming the
// stream from the last index seen without losing or repeating events.

// memLog is the replicated event window every memAgent serves.
type memLog struct {
	mu      sync.Mutex
	evs     []rpc.Event
	changed chan struct{}
}

func (l *memLog) add(evs ...rpc.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, evs...)
	close(l.changed)
	l.changed = make(chan struct{})
}

// from returns the events with index >= from and a channel closed on change.
func (l *memLog) from(idx uint64) ([]rpc.Event, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []rpc.Event
	for _, e := range l.evs {
		if e.Index >= idx {
			out = append(out, e)
		}
	}
	return out, l.changed
}

type memAgent struct {
	node string
	log  *memLog
	srv  *rpc.Server

	mu    sync.Mutex
	down  bool
	conns []net.Conn
	froms []uint64 // from_index of every events.subscribe
}

func newMemAgent(node string, log *memLog) *memAgent {
	a := &memAgent{node: node, log: log}
	a.srv = rpc.NewServer(map[string]rpc.Handler{
		rpc.MethodHello: rpc.Func(func(context.Context, rpc.HelloParams) (rpc.HelloResult, error) {
			return rpc.HelloResult{ProtocolVersion: rpc.ProtocolVersion, NodeID: node}, nil
		}),
		rpc.MethodEventsSubscribe: rpc.Func(func(ctx context.Context, p rpc.SubscribeParams) (rpc.SubscribeResult, error) {
			a.mu.Lock()
			a.froms = append(a.froms, p.FromIndex)
			a.mu.Unlock()
			from := p.FromIndex
			if from == 0 {
				evs, _ := log.from(0)
				from = uint64(len(evs)) + 1 // "now"
			}
			err := rpc.Spawn(ctx, func(cctx context.Context) {
				sent := 0
				for {
					evs, ch := log.from(from)
					for _, e := range evs[sent:] {
						if rpc.Notify(cctx, rpc.NotifyEvent, e) != nil {
							return
						}
					}
					sent = len(evs)
					select {
					case <-ch:
					case <-cctx.Done():
						return
					}
				}
			})
			return rpc.SubscribeResult{Subscription: node + "-1", FromIndex: from}, err
		}),
	}, rpc.Options{})
	return a
}

func (a *memAgent) crash() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = true
	for _, c := range a.conns {
		c.Close()
	}
}

func (a *memAgent) subscribedFrom() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.froms)
}

func TestLiveFailsOverAndResumesTheStream(t *testing.T) {
	log := &memLog{changed: make(chan struct{})}
	agents := map[string]*memAgent{"unix:///mem/a": newMemAgent("na", log), "unix:///mem/b": newMemAgent("nb", log)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := NewLive([]string{"unix:///mem/a", "unix:///mem/b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.ReconnectDelay, l.BatchEvery = 20*time.Millisecond, 10*time.Millisecond
	l.dial = func(_ context.Context, ep string, opts rpc.ConnOptions) (*rpc.Conn, error) {
		a := agents[ep]
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.down {
			return nil, &rpc.ConnError{Endpoint: ep, Err: errors.New("connection refused"), NotSent: true}
		}
		c1, c2 := net.Pipe()
		a.conns = append(a.conns, c2)
		go a.srv.ServeConn(ctx, c2)
		return rpc.NewConn(c1, opts), nil
	}
	msgs := make(chan tea.Msg, 100)
	go l.Run(ctx, func(m tea.Msg) { msgs <- m })

	next := func() tea.Msg {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("no message from the connection manager")
		}
		return nil
	}
	waitConn := func(state connState) connMsg {
		t.Helper()
		for {
			if c, ok := next().(connMsg); ok && c.State == state {
				return c
			}
		}
	}
	var got []rpc.Event
	waitEvents := func(n int) {
		t.Helper()
		for len(got) < n {
			if e, ok := next().(eventsMsg); ok {
				got = append(got, e.Events...)
			}
		}
	}

	if c := waitConn(connLive); c.Endpoint != "unix:///mem/a" || c.Node != "na" {
		t.Fatalf("first connection: %+v", c)
	}
	log.add(rpc.Event{Index: 1, Kind: "run"}, rpc.Event{Index: 2, Kind: "run"}, rpc.Event{Index: 2, Seq: 1, Kind: "task"})
	waitEvents(3)

	agents["unix:///mem/a"].crash()
	down := waitConn(connDown)
	if down.Node != "na" || down.RetryAt.Before(down.Since) {
		t.Fatalf("down: %+v", down)
	}
	if c := waitConn(connLive); c.Endpoint != "unix:///mem/b" || c.Node != "nb" {
		t.Fatalf("failover went to %+v", c)
	}
	if from := agents["unix:///mem/b"].subscribedFrom(); !slices.Equal(from, []uint64{2}) {
		t.Fatalf("resubscribed from %v, want [2] (the last index seen)", from)
	}
	log.add(rpc.Event{Index: 3, Kind: "run"})
	waitEvents(4)
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Kind+string(rune('0'+e.Index))+string(rune('0'+e.Seq)))
	}
	if want := []string{"run10", "run20", "task21", "run30"}; !slices.Equal(keys, want) {
		t.Fatalf("events %v, want %v (no loss, no repeat)", keys, want)
	}
	if l.cur.Load() != 1 {
		t.Fatalf("calls still go to endpoint %d", l.cur.Load())
	}
}

func TestLiveBatchesEvents(t *testing.T) {
	l, err := NewLive([]string{"unix:///mem/x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.BatchEvery = 50 * time.Millisecond
	for i := 1; i <= 500; i++ {
		l.onNotify(rpc.NotifyEvent, []byte(`{"index":`+itoa(i)+`,"seq":0,"kind":"task"}`))
		l.onNotify(rpc.NotifyEvent, []byte(`{"index":`+itoa(i)+`,"seq":0,"kind":"task"}`)) // a duplicate
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs := make(chan tea.Msg, 10)
	go l.pump(ctx, func(m tea.Msg) { msgs <- m })
	m := (<-msgs).(eventsMsg)
	if len(m.Events) != 500 || m.Resync {
		t.Fatalf("one batch of %d events (resync %v), want 500 deduplicated", len(m.Events), m.Resync)
	}
}
