package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// A queue limited to 20 tasks per second (burst 1) never leases more than
// 20 in any 1-second window, with 64 claimers spread over three real
// agents and a backlog far larger than the run can drain. Lease times are
// the leader's stamps (lease_expires_at - lease_ms), the times the limit is
// enforced at. The default suite runs 5 s; FLOWD_E2E_LONG=1 runs the
// issue's 30 s.
func TestRateLimitedQueueNeverLeasesFaster(t *testing.T) {
	run := 5 * time.Second
	if os.Getenv("FLOWD_E2E_LONG") != "" {
		run = 30 * time.Second
	}
	const rate, claimers, leaseMS = 20, 64, 120_000
	c := startCluster(t, 3)
	admin := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), run+60*time.Second)
	defer cancel()
	r := float64(rate)
	if _, err := admin.QueueSetRate(ctx, "limited", "", r, 0); err != nil {
		t.Fatal(err)
	}
	// The backlog: more than the run can lease, 100 tasks a run.
	need := int(run.Seconds())*rate*3/2 + 100
	for i := 0; i < need; i += 100 {
		var tasks []string
		for k := range 100 {
			tasks = append(tasks, fmt.Sprintf(`{"key":"t%d","type":"limited","queue":"limited","lease_ms":%d}`, k, leaseMS))
		}
		wf := json.RawMessage(`{"name":"limited","tasks":[` + strings.Join(tasks, ",") + `]}`)
		if _, err := admin.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var leasedAt []time.Time
	wctx, stop := context.WithTimeout(ctx, run)
	defer stop()
	var wg sync.WaitGroup
	for i := range claimers {
		cl := c.client(c.agents[i%len(c.agents)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				got, err := cl.TaskClaim(wctx, rpc.ClaimParams{WorkerID: fmt.Sprint("w", i), Queues: []string{"limited"}, Max: 4, WaitMS: 1000})
				var re *rpc.Error
				if errors.As(err, &re) && re.Code == rpc.CodeUnavailable && wctx.Err() == nil {
					// "Did not commit in time; retry" on a loaded box: the
					// protocol's retryable answer, and the client re-sends
					// its request id with the next claim, as a worker does.
					continue
				}
				if err != nil {
					if wctx.Err() == nil {
						t.Errorf("claimer %d: %v", i, err)
					}
					return
				}
				for _, g := range got {
					mu.Lock()
					leasedAt = append(leasedAt, g.LeaseExpiresAt.Add(-time.Duration(g.LeaseMS)*time.Millisecond))
					mu.Unlock()
					// Complete off the claim loop's clock: errors here are
					// not what this test is about, but they must not happen.
					if ack, err := cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: g.TaskID, FencingToken: g.FencingToken}); err != nil || !ack.Accepted {
						t.Errorf("complete %s: %+v %v", g.TaskID, ack, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(leasedAt, func(a, b time.Time) int { return a.Compare(b) })
	worst := 0
	for i := range leasedAt {
		n := 0
		for j := i; j < len(leasedAt) && leasedAt[j].Before(leasedAt[i].Add(time.Second)); j++ {
			n++
		}
		worst = max(worst, n)
	}
	t.Logf("%d leases in %v over %d claimers; busiest 1 s window: %d", len(leasedAt), run, claimers, worst)
	if worst > rate {
		t.Fatalf("%d leases in one second, limit %d/s", worst, rate)
	}
	if min := int(run.Seconds()) * rate * 3 / 4; len(leasedAt) < min {
		t.Fatalf("%d leases in %v: the limit throttled below %d/s (want at least %d)", len(leasedAt), run, rate, min)
	}
	qs, err := admin.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs.Queues {
		if q.Name == "limited" && (q.RateLimit == nil || q.RateLimit.Rate != rate || q.Leased < uint64(len(leasedAt))) { // a claim cut off by the run's end may lease unseen
			t.Fatalf("queue.list: %+v (want rate %d and at least %d leased)", q, rate, len(leasedAt))
		}
	}
}
