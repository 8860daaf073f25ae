package rpc

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
)

// gatedConn counts the writes to a connection and holds the first one
// until gate is closed.
type gatedConn struct {
	net.Conn
	writes atomic.Int32
	gate   chan struct{}
}

func (g *gatedConn) Write(b []byte) (int, error) {
	if g.writes.Add(1) == 1 {
		<-g.gate
	}
	return g.Conn.Write(b)
}

// Calls made on one connection while a write is in progress go out
// together in the next write, not one write each: an agent's forwarding
// connection carries the calls of all its clients in few writes (and TLS
// records).
func TestConcurrentCallsShareWrites(t *testing.T) {
	s := NewServer(map[string]Handler{"echo": Func(func(_ context.Context, p map[string]int) (map[string]int, error) { return p, nil })},
		Options{Logger: quietLogger()})
	a, b := net.Pipe()
	go func() { _ = s.ServeConn(context.Background(), b) }()
	g := &gatedConn{Conn: a, gate: make(chan struct{})}
	c := NewConn(g, ConnOptions{Logger: quietLogger()})
	defer func() { c.Close(); b.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	const calls = 32
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	call := func(i int) {
		defer wg.Done()
		var out map[string]int
		if err := c.Call(ctx, "echo", map[string]int{"i": i}, &out); err != nil || out["i"] != i {
			errs <- err
		}
	}
	wg.Add(1)
	go call(0)
	testutil.EventuallyTrue(t, 5*time.Second, time.Millisecond, "the first write is held", func() bool { return g.writes.Load() == 1 })
	wg.Add(calls - 1)
	for i := 1; i < calls; i++ {
		go call(i)
	}
	testutil.EventuallyTrue(t, 5*time.Second, time.Millisecond, "every call is queued", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pending) == calls
	})
	close(g.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a call failed: %v", err)
	}
	if n := g.writes.Load(); n >= calls/2 {
		t.Fatalf("%d calls took %d writes; calls queued during a write should share the next", calls, n)
	}
	t.Logf("%d calls, %d writes", calls, g.writes.Load())
}
