package rpc

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// claimAgent answers task.claim from a script of errors (nil: an empty
// success) and records each claim's request id.
type claimAgent struct {
	mu     sync.Mutex
	script []error
	ids    []string
	frozen chan struct{} // non-nil: claims get no answer until it is closed (a stopped agent)
}

func (a *claimAgent) answer(errs ...error) {
	a.mu.Lock()
	a.script = append(a.script, errs...)
	a.mu.Unlock()
}

func (a *claimAgent) lastID(t *testing.T) string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ids) == 0 {
		t.Fatal("no claim arrived")
	}
	return a.ids[len(a.ids)-1]
}

func startClaimAgent(t *testing.T) (*claimAgent, *Client) {
	t.Helper()
	a, ep := newClaimAgent(t)
	return a, routeClient(t, []string{ep}, ClientOptions{})
}

func newClaimAgent(t *testing.T) (*claimAgent, string) {
	t.Helper()
	a := &claimAgent{}
	dir, err := os.MkdirTemp("", "rpcclaim-") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "a.sock")
	srv := NewServer(map[string]Handler{
		MethodHello: Func(func(context.Context, HelloParams) (HelloResult, error) {
			return HelloResult{ProtocolVersion: ProtocolVersion, NodeID: "n1", LeaderID: "n1"}, nil
		}),
		MethodTaskClaim: Func(func(ctx context.Context, p ClaimParams) (ClaimResult, error) {
			a.mu.Lock()
			frozen := a.frozen
			a.ids = append(a.ids, p.RequestID)
			a.mu.Unlock()
			if frozen != nil {
				select {
				case <-frozen:
				case <-ctx.Done():
				}
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			var err error
			if len(a.script) > 0 {
				err, a.script = a.script[0], a.script[1:]
			}
			return ClaimResult{Tasks: []Claimed{}}, err
		}),
	}, Options{Logger: quietLogger()})
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(context.Background(), l)
	t.Cleanup(func() { srv.Close() })
	return a, "unix://" + path
}

func unavailable() error {
	return &domain.UnavailableError{Reason: "no leader reachable in time", RetryAfter: time.Millisecond}
}

// A claim answered -32004 may have leased tasks whose answer was lost (a
// forwarding agent cut off from the leader answers -32004 although the
// leader leased them): the worker's next claim re-sends its request id, so
// the leader answers those leases instead of leaving them to expire.
func TestClaimAfterUnknownOutcomeResendsItsRequestID(t *testing.T) {
	a, c := startClaimAgent(t)
	p := ClaimParams{WorkerID: "w", Queues: []string{"q"}, Max: 4}
	a.answer(unavailable())
	if _, err := c.TaskClaim(testCtx(t), p); err == nil {
		t.Fatal("the scripted -32004 was not returned")
	}
	lost := a.lastID(t)
	if _, err := c.TaskClaim(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if got := a.lastID(t); got != lost {
		t.Fatalf("the claim after an unknown outcome sent request id %q, want the lost claim's %q", got, lost)
	}
	// Answered: the next claim is a new one.
	if _, err := c.TaskClaim(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if got := a.lastID(t); got == lost {
		t.Fatalf("a claim after an answered one re-sent request id %q", got)
	}
}

// The re-sent id is used only by a claim its leases fit (same worker,
// queues and types, at least the max), only once, and never after a
// definite error or when the caller picked its own id.
func TestClaimResendOnlyWhenItFits(t *testing.T) {
	a, c := startClaimAgent(t)
	p := ClaimParams{WorkerID: "w", Queues: []string{"q"}, Max: 4}
	fresh := func(name string, q ClaimParams, prev string) string {
		t.Helper()
		_, _ = c.TaskClaim(testCtx(t), q)
		got := a.lastID(t)
		if got == prev {
			t.Fatalf("%s: re-sent request id %q", name, got)
		}
		return got
	}
	a.answer(unavailable())
	lost := fresh("first", p, "")
	smaller := p
	smaller.Max = 2
	fresh("smaller max", smaller, lost)
	fresh("after the memo was used", p, lost) // the memo is used once, even by a claim it did not fit

	a.answer(unavailable())
	lost = fresh("second loss", p, "")
	other := p
	other.Queues = []string{"other"}
	fresh("other queues", other, lost)

	a.answer(unavailable())
	lost = fresh("third loss", p, "")
	otherWorker := p
	otherWorker.WorkerID = "w2"
	fresh("other worker", otherWorker, lost)
	if _, err := c.TaskClaim(testCtx(t), p); err != nil { // w's memo is untouched by w2
		t.Fatal(err)
	}
	if got := a.lastID(t); got != lost {
		t.Fatalf("worker w's claim after w2's sent %q, want w's lost %q", got, lost)
	}

	a.answer(Errorf(CodeInvalidParams, "no such queue"))
	lost = fresh("definite error", p, "")
	fresh("after a definite error", p, lost)

	a.answer(unavailable())
	lost = fresh("fourth loss", p, "")
	own := p
	own.RequestID = "mine"
	if _, err := c.TaskClaim(testCtx(t), own); err != nil {
		t.Fatal(err)
	}
	if got := a.lastID(t); got != "mine" {
		t.Fatalf("a claim with its own request id sent %q", got)
	}
	if _, err := c.TaskClaim(testCtx(t), p); err != nil { // the memo outlived the caller's own id
		t.Fatal(err)
	}
	if got := a.lastID(t); got != lost {
		t.Fatalf("the claim after one with its own id sent %q, want the lost %q", got, lost)
	}
}

// A worker whose agent answers -32004 (cut off from the leader by a
// partition, while the leader leased tasks to its claim) re-sends the claim
// through another endpoint, which can reach the leader and answer those
// leases, instead of asking the cut-off agent again until they expire.
func TestClaimAfterUnavailableMovesToTheNextEndpoint(t *testing.T) {
	cut, cutEP := newClaimAgent(t)
	other, otherEP := newClaimAgent(t)
	c := routeClient(t, []string{cutEP, otherEP}, ClientOptions{Route: RouteAny})
	p := ClaimParams{WorkerID: "w", Queues: []string{"q"}, Max: 4}
	cut.answer(unavailable())
	if _, err := c.TaskClaim(testCtx(t), p); err == nil {
		t.Fatal("the scripted -32004 was not returned")
	}
	lost := cut.lastID(t)
	if _, err := c.TaskClaim(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	if got := other.lastID(t); got != lost {
		t.Fatalf("the re-sent claim reached the other agent with request id %q, want %q", got, lost)
	}
	cut.mu.Lock()
	n := len(cut.ids)
	cut.mu.Unlock()
	if n != 1 {
		t.Fatalf("the cut-off agent got %d claims, want 1", n)
	}
}

// An agent stopped right after its leader leased tasks to a claim (SIGSTOP
// of the leader the worker talks to) holds the claim unanswered: past the
// claim's wait plus claimPatience the client leaves it and re-sends the
// claim, same request id, through the next endpoint (where the new leader
// answers those leases) instead of waiting for the stopped agent until the
// leases expire.
func TestClaimLeavesAStuckAgent(t *testing.T) {
	stuck, stuckEP := newClaimAgent(t)
	stuck.frozen = make(chan struct{})
	t.Cleanup(func() { close(stuck.frozen) })
	other, otherEP := newClaimAgent(t)
	c := routeClient(t, []string{stuckEP, otherEP}, ClientOptions{Route: RouteAny})
	p := ClaimParams{WorkerID: "w", Queues: []string{"q"}, Max: 4, WaitMS: 100}
	start := time.Now()
	if _, err := c.TaskClaim(testCtx(t), p); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	first, again := stuck.lastID(t), other.lastID(t)
	if again != first {
		t.Fatalf("the claim re-sent through the next endpoint carried %q, want %q", again, first)
	}
	if min := 100*time.Millisecond + claimPatience; took < min {
		t.Fatalf("the claim left the stuck agent after %s, before its wait plus patience (%s)", took, min)
	}
}
