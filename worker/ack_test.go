package worker

import (
	"context"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A task claimed by a worker that never heard of it (its claim reply was
// lost) does not burn an attempt: with max_attempts 1 its lease expires
// unacknowledged, the task is ready again at once, and the SDK worker that
// gets it next runs attempt 1 and succeeds.
func TestClaimedButNeverAcknowledgedDoesNotBurnAnAttempt(t *testing.T) {
	e := newEnv(t)
	id := e.submit(`{"tasks":[{"key":"x","type":"ack","lease_ms":400,"retry":{"max_attempts":1}}]}`)
	// The lost claim: leased to "ghost", whose reply nobody reads.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := e.c.TaskClaim(ctx, rpc.ClaimParams{WorkerID: "ghost", Types: []string{"ack"}, Max: 1, WaitMS: 5000})
	if err != nil || len(got) != 1 || got[0].Attempt != 1 {
		t.Fatalf("ghost claim: %+v %v", got, err)
	}
	w := e.worker(Options{})
	seen := make(chan int, 4)
	w.Register("ack", func(_ context.Context, task *Task) (any, error) {
		seen <- task.Attempt
		return "done", nil
	})
	e.start(w)
	if r := e.wait(id); r.State != domain.RunSucceeded {
		t.Fatalf("run %s, want succeeded (the lost lease spent the only attempt?)", r.State)
	}
	if n := <-seen; n != 1 {
		t.Fatalf("handler ran attempt %d, want 1", n)
	}
	tk := e.task(id + "/x")
	if tk.Attempt != 1 || len(tk.Attempts) != 2 ||
		tk.Attempts[0].Outcome != "lease_unacked" || tk.Attempts[0].Worker != "ghost" || tk.Attempts[0].N != 1 ||
		tk.Attempts[1].Outcome != "succeeded" || tk.Attempts[1].N != 1 {
		t.Fatalf("task attempt %d, history %+v", tk.Attempt, tk.Attempts)
	}
}

// The SDK acknowledges a claim with its first heartbeat (AckAfter): a
// worker that then dies (stopped hard) has spent the attempt, so with
// max_attempts 1 the task fails with its lease expired.
func TestSDKAcknowledgesWithItsFirstHeartbeat(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{AckAfter: 20 * time.Millisecond})
	acked := make(chan struct{})
	w.Register("hold", func(ctx context.Context, task *Task) (any, error) {
		// The first heartbeat extends the lease: that is the ack landing.
		for ctx.Err() == nil {
			if tk, err := e.c.TaskGet(ctx, task.ID); err == nil && tk.LeaseExpiresAt.After(task.LeaseExpires) {
				close(acked)
				break
			}
			time.Sleep(10 * time.Millisecond) // polling the replicated state
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"x","type":"hold","lease_ms":3000,"retry":{"max_attempts":1}}]}`)
	select {
	case <-acked:
	case <-time.After(10 * time.Second):
		t.Fatal("the SDK never heartbeat")
	}
	w.Stop() // the worker dies holding an acknowledged lease
	if r := e.wait(id); r.State != domain.RunFailed {
		t.Fatalf("run %s, want failed: an acknowledged lease that expires spends the attempt", r.State)
	}
	if tk := e.task(id + "/x"); len(tk.Attempts) != 1 || tk.Attempts[0].Outcome != "lease_expired" {
		t.Fatalf("history %+v", tk.Attempts)
	}
}
