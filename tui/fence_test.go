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

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Read-your-writes across endpoints: a replay goes to the leader's
// endpoint, the run detail then reads the new run from the follower on
// screen. The follower here applies entries late (its applied index moves
// on by 3 at each cluster.status) and knows the new run only once it has
// applied the replay's index, as a real follower would.

type lagAgent struct {
	ep string

	mu      sync.Mutex
	applied uint64
	gets    []string // run.get answers: "found" or "not found"
}

func (a *lagAgent) answers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.gets...)
}

func serveAgent(t *testing.T, dir, id string, handlers map[string]rpc.Handler) string {
	t.Helper()
	srv := rpc.NewServer(handlers, rpc.Options{})
	l, err := net.Listen("unix", filepath.Join(dir, id+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), l)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + filepath.Join(dir, id+".sock")
}

func TestLiveReadsItsOwnWriteOnAFollower(t *testing.T) {
	dir, err := os.MkdirTemp("", "tuifence-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const newID, replayIndex = "0197a0b1-0099-7000-8000-000000000099", 50
	status := func(id, state string, applied func() uint64) rpc.Handler {
		return rpc.Func(func(context.Context, struct{}) (rpc.ClusterStatus, error) {
			return rpc.ClusterStatus{NodeID: id, LeaderID: "nb", State: state, AppliedIndex: applied()}, nil
		})
	}
	f := &lagAgent{applied: 40}
	f.ep = serveAgent(t, dir, "na", map[string]rpc.Handler{
		rpc.MethodClusterStatus: status("na", "follower", func() uint64 {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.applied += 3
			return f.applied
		}),
		rpc.MethodRunGet: rpc.Func(func(_ context.Context, p rpc.IDParams) (rpc.Run, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.applied < replayIndex {
				f.gets = append(f.gets, "not found")
				return rpc.Run{}, fmt.Errorf("%w: no run matches %q", domain.ErrNotFound, p.ID)
			}
			f.gets = append(f.gets, "found")
			return rpc.Run{ID: p.ID, State: domain.RunPending}, nil
		}),
	})
	leader := serveAgent(t, dir, "nb", map[string]rpc.Handler{
		rpc.MethodClusterStatus: status("nb", "leader", func() uint64 { return replayIndex }),
		rpc.MethodRunReplay: rpc.Func(func(_ context.Context, p rpc.ReplayParams) (rpc.SubmitResult, error) {
			return rpc.SubmitResult{ID: p.NewID, State: domain.RunPending, Created: true, Index: replayIndex}, nil
		}),
	})
	l, err := NewLive([]string{f.ep, leader}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.Probe(ctx) // learns that nb leads; the screen stays on na
	if _, err := l.RunReplay(ctx, rpc.ReplayParams{ID: "r1", NewID: newID}); err != nil {
		t.Fatal(err)
	}
	r, err := l.RunGet(ctx, newID)
	if err != nil {
		t.Fatalf("the run just replayed is not readable on the follower on screen: %v", err)
	}
	if r.ID != newID {
		t.Fatalf("run.get answered %s, want %s", r.ID, newID)
	}
	if got := f.answers(); len(got) != 1 || got[0] != "found" {
		t.Fatalf("the follower's run.get answers: %v (the read did not wait for the write's index)", got)
	}
	// The fence is reached: later reads go straight through, without
	// asking cluster.status again.
	f.mu.Lock()
	before := f.applied
	f.mu.Unlock()
	if _, err := l.RunGet(ctx, newID); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	after := f.applied
	f.mu.Unlock()
	if after != before {
		t.Errorf("a read after the fence was reached asked cluster.status again (applied %d -> %d)", before, after)
	}
}
