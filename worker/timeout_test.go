package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// At the task's timeout_ms the handler's context is cancelled with cause
// ErrTimeout and its result discarded; the cluster fails the attempt and
// retries it, and the retry's result is what the task keeps.
func TestTimeoutCancelsHandlerAndTheRetrySucceeds(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{})
	cause := make(chan error, 1)
	w.Register("bounded", func(ctx context.Context, task *Task) (any, error) {
		if task.Attempt > 1 {
			return "second", nil
		}
		if task.Deadline.IsZero() {
			t.Error("no deadline on a task with timeout_ms")
		}
		<-ctx.Done()
		select {
		case cause <- context.Cause(ctx):
		default:
		}
		return "too late", nil
	})
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"b","type":"bounded","timeout_ms":700,"lease_ms":3000,"retry":{"max_attempts":2,"initial_backoff_ms":10}}]}`)
	select {
	case err := <-cause:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("handler context cause %v, want ErrTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled at the timeout")
	}
	if r := e.wait(id); r.State != domain.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
	tk := e.task(id + "/b")
	if string(tk.Result) != `"second"` || len(tk.Attempts) != 2 || tk.Attempts[0].Outcome != "timed_out" {
		t.Fatalf("task result %s attempts %+v", tk.Result, tk.Attempts)
	}
}
