package tui

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// Actions go to the leader's endpoint, learnt from Probe, and fall back to
// the endpoint on screen when the leader's fails. The agents are fakes on
// Unix sockets (Live's per-endpoint clients dial them).

type routeAgent struct {
	srv *rpc.Server
	ep  string

	mu      sync.Mutex
	cancels int
}

func (a *routeAgent) n() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cancels
}

func startRouteAgents(t *testing.T, leader string, ids ...string) map[string]*routeAgent {
	t.Helper()
	dir, err := os.MkdirTemp("", "tuiroute-") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	out := map[string]*routeAgent{}
	for _, id := range ids {
		a := &routeAgent{ep: "unix://" + filepath.Join(dir, id+".sock")}
		state := "follower"
		if id == leader {
			state = "leader"
		}
		a.srv = rpc.NewServer(map[string]rpc.Handler{
			rpc.MethodClusterStatus: rpc.Func(func(context.Context, struct{}) (rpc.ClusterStatus, error) {
				return rpc.ClusterStatus{NodeID: id, LeaderID: leader, State: state}, nil
			}),
			rpc.MethodRunCancel: rpc.Func(func(context.Context, rpc.VerbParams) (rpc.ChangedResult, error) {
				a.mu.Lock()
				a.cancels++
				a.mu.Unlock()
				return rpc.ChangedResult{Changed: true}, nil
			}),
		}, rpc.Options{})
		l, err := net.Listen("unix", filepath.Join(dir, id+".sock"))
		if err != nil {
			t.Fatal(err)
		}
		go a.srv.Serve(context.Background(), l)
		t.Cleanup(func() { a.srv.Close() })
		out[id] = a
	}
	return out
}

func cancelCounts(agents map[string]*routeAgent) string {
	return fmt.Sprintf("na %d, nb %d, nc %d", agents["na"].n(), agents["nb"].n(), agents["nc"].n())
}

func TestLiveSendsActionsToTheLeader(t *testing.T) {
	agents := startRouteAgents(t, "nb", "na", "nb", "nc")
	l, err := NewLive([]string{agents["na"].ep, agents["nb"].ep, agents["nc"].ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	verb := func() {
		t.Helper()
		if _, err := l.RunVerb(ctx, rpc.MethodRunCancel, "r1", "test"); err != nil {
			t.Fatal(err)
		}
	}
	verb() // the leader is not known yet: the endpoint on screen
	l.Probe(ctx)
	verb()
	if got := cancelCounts(agents); got != "na 1, nb 1, nc 0" {
		t.Fatalf("cancels: %s", got)
	}
	// The leader's endpoint fails: the call is repeated on the endpoint on
	// screen, and the leader is forgotten until the next probe.
	agents["nb"].srv.Close()
	verb()
	verb()
	if got := cancelCounts(agents); got != "na 3, nb 1, nc 0" {
		t.Fatalf("cancels after the leader's endpoint failed: %s", got)
	}
}

func TestLiveRouteAnyKeepsActionsOnScreen(t *testing.T) {
	agents := startRouteAgents(t, "nb", "na", "nb", "nc")
	l, err := NewLive([]string{agents["na"].ep, agents["nb"].ep, agents["nc"].ep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Route = rpc.RouteAny
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.Probe(ctx)
	if _, err := l.RunVerb(ctx, rpc.MethodRunCancel, "r1", "test"); err != nil {
		t.Fatal(err)
	}
	if got := cancelCounts(agents); got != "na 1, nb 0, nc 0" {
		t.Fatalf("cancels: %s", got)
	}
}
