package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// Adaptive concurrency end to end: three agents, a queue with concurrency
// auto (1..4, target 300 ms: well above what a loaded box takes to claim
// and complete) and a worker with more slots than the ceiling whose handler
// waits on a gate. While the gate opens only every 800 ms
// (latency ~3x the target) the leader halves the cap down to the floor;
// once the gate stays open (latency of a few ms) it raises the cap back to
// the ceiling. Then leadership moves: the new leader keeps the cap, starts
// with an empty window and brings the cap back to the floor under slow
// completions. Every agent reports (and exports) the leader's cap, and no
// more tasks run at once than the ceiling.
func TestAutoConcurrencyFollowsWorkerLatency(t *testing.T) {
	t.Setenv("FLOWD_AUTO_CONCURRENCY_PERIOD", "50ms")
	t.Setenv("FLOWD_AUTO_CONCURRENCY_WINDOW", "1s")
	ta := testagents.Start(t, 3, nil)
	c, err := newClientFor(ta.Eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &env{t: t, eps: ta.Eps, c: c}
	ctx := context.Background()
	if _, err := c.QueueSetAuto(ctx, "aq", 1, 4, 300); err != nil {
		t.Fatal(err)
	}
	if q := queueNamed(t, c, "aq"); q.Auto == nil || q.Concurrency != 4 {
		t.Fatalf("after queue.set auto: %+v, want auto with cap 4 (the ceiling)", q)
	}

	// The gate: a handler holds its task until the current gate closes.
	var gate atomic.Pointer[chan struct{}]
	newGate := func() { ch := make(chan struct{}); gate.Store(&ch) }
	newGate()
	var running, peak atomic.Int64
	w := e.worker(Options{Concurrency: 8, Queues: []string{"aq"}})
	w.Register("slow", func(ctx context.Context, _ *Task) (any, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-*gate.Load():
			return "ok", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	for range 8 {
		var tasks []string
		for i := range 100 {
			tasks = append(tasks, fmt.Sprintf(`{"key":"k%03d","type":"slow","queue":"aq"}`, i))
		}
		e.submit(`{"tasks":[` + strings.Join(tasks, ",") + `]}`)
	}
	e.start(w)

	// Slow phase: the gate opens every 800 ms.
	// slowPhase opens the gate every 800 ms until stop is closed.
	var slowDone sync.WaitGroup
	slowPhase := func(stop <-chan struct{}) {
		slowDone.Add(1)
		go func() {
			defer slowDone.Done()
			tick := time.NewTicker(800 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					old := gate.Load()
					newGate()
					close(*old)
				}
			}
		}()
	}
	stopSlow := make(chan struct{})
	slowPhase(stopSlow)
	waitCap(t, c, "aq", func(n int) bool { return n == 1 }, "the floor 1 under slow completions")
	if p := peak.Load(); p > 4 {
		t.Fatalf("%d tasks ran at once with a ceiling of 4", p)
	}

	// Fast phase: the gate stays open.
	close(stopSlow)
	slowDone.Wait()
	close(*gate.Load())
	waitCap(t, c, "aq", func(n int) bool { return n == 4 }, "the ceiling 4 under fast completions")

	// The caps above were reached by the leaders' own changes: at least one
	// decrease and one increase (how many steps depends on how many periods
	// fell between the samples on a loaded box, and a change proposed by a
	// leader that lost office before it committed is not counted).
	var changes uint64 // by whichever agent led (an election under load may move it)
	for _, a := range ta.Agents {
		changes += testagents.RaftNode(a).AutoCapChanges()
	}
	if changes < 2 {
		t.Fatalf("the leaders changed the cap %d times, want a decrease and an increase at least", changes)
	}
	// Failover: the new leader starts with an empty window, keeps the cap
	// its predecessor set, and steers it again once its own samples come:
	// slow completions lower it under the new leader.
	old := leaderIndex(t, ta)
	if err := ta.Agents[old].Node().TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	var next int
	testutil.EventuallyTrue(t, 10*time.Second, 10*time.Millisecond, "a new leader after the transfer", func() bool {
		next = leaderOrNone(ta)
		return next >= 0 && next != old && testagents.RaftNode(ta.Agents[next]).LoopsRunning()
	})
	if q := queueNamed(t, c, "aq"); q.Concurrency != 4 || q.Auto == nil {
		t.Fatalf("after the failover: %+v, want auto with the cap 4 the old leader set", q)
	}
	newGate()
	for range 2 {
		var tasks []string
		for i := range 100 {
			tasks = append(tasks, fmt.Sprintf(`{"key":"k%03d","type":"slow","queue":"aq"}`, i))
		}
		e.submit(`{"tasks":[` + strings.Join(tasks, ",") + `]}`)
	}
	stopSlow = make(chan struct{})
	slowPhase(stopSlow)
	// At the floor the cap stays put while completions stay slow, so every
	// agent can be compared with the leader.
	waitCap(t, c, "aq", func(n int) bool { return n == 1 }, "the floor again under the new leader")
	if n := testagents.RaftNode(ta.Agents[next]).AutoCapChanges(); n == 0 && leaderOrNone(ta) == next {
		t.Fatal("the new leader changed no cap")
	}
	defer func() {
		close(stopSlow)
		slowDone.Wait()
		close(*gate.Load())
	}()

	// Every agent holds the same cap once it has applied the leader's state.
	want := 1
	for i, a := range ta.Agents {
		n := a.Node()
		if err := n.WaitForApplied(ctx, ta.Agents[leaderIndex(t, ta)].Node().FSM().AppliedIndex()); err != nil {
			t.Fatal(err)
		}
		qs, err := n.FSM().Queues()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == "aq" && (q.Auto == nil || q.Concurrency != want) {
				t.Fatalf("agent %d: queue aq %+v, want auto with the leader's cap %d", i, q.QueueState, want)
			}
		}
		// ... and exports it.
		line := fmt.Sprintf(`flowd_queue_concurrency_limit{queue="aq"} %d`, want)
		if m := scrape(t, a.Config().HTTPAddr); !strings.Contains(m, line+"\n") {
			t.Fatalf("agent %d's /metrics lacks %q", i, line)
		}
	}
}

func queueNamed(t *testing.T, c *rpc.Client, name string) rpc.Queue {
	t.Helper()
	res, err := c.QueueList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range res.Queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("no queue %s in %+v", name, res.Queues)
	return rpc.Queue{}
}

// waitCap polls queue.list (20 ms apart) until the queue's cap satisfies ok,
// for at most 10 s.
func waitCap(t *testing.T, c *rpc.Client, name string, ok func(int) bool, what string) {
	t.Helper()
	var caps []int
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "queue "+name+" to reach "+what, func() error {
		q := queueNamed(t, c, name)
		if len(caps) == 0 || caps[len(caps)-1] != q.Concurrency {
			caps = append(caps, q.Concurrency)
		}
		if ok(q.Concurrency) {
			return nil
		}
		return fmt.Errorf("caps seen %v", caps)
	})
}

func leaderIndex(t *testing.T, ta *testagents.Cluster) int {
	t.Helper()
	i := leaderOrNone(ta)
	if i < 0 {
		t.Fatal("no leader")
	}
	return i
}

func leaderOrNone(ta *testagents.Cluster) int {
	for i, a := range ta.Agents {
		if a.Node().IsLeader() {
			return i
		}
	}
	return -1
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
