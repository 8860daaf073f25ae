package worker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/rpc"
)

// A worker with a worker token on an agent's TLS client listener claims and
// completes a task; one with a secret the cluster does not know stops at
// once, saying so.
func TestWorkerTokenOnTheTCPListener(t *testing.T) {
	ca, tweak := testagents.WithTLS(t, 1)
	ta := testagents.StartWith(t, 1, nil, tweak)
	admin, err := rpc.NewClient(ta.Eps, rpc.ClientOptions{}) // the socket: the agent's own uid is admin
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := admin.ACLTokenCreate(ctx, "worker", "sdk-test")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, eps: []string{ta.ClientEndpoint(0)}, c: admin}

	w := e.worker(Options{ID: "w-token", Token: tok.Secret, CACert: ca})
	w.Register("tok-echo", func(_ context.Context, task *Task) (any, error) {
		return json.RawMessage(`{"saw":` + string(task.Input) + `}`), nil
	})
	e.start(w)
	id := e.submit(`{"name":"tok","tasks":[{"key":"a","type":"tok-echo","input":7}]}`)
	run := e.wait(id)
	if run.State != "succeeded" || len(run.Tasks) != 1 || string(run.Tasks[0].Result) != `{"saw":7}` {
		t.Fatalf("run over the TLS listener with a worker token: %+v", run)
	}
	if tk := e.task(id + "/a"); len(tk.Attempts) != 1 || tk.Attempts[0].Worker != "w-token" {
		t.Fatalf("attempts: %+v", tk.Attempts)
	}

	bad := e.worker(Options{ID: "w-bad", Token: "flowd_not-a-token", CACert: ca})
	bad.Register("tok-echo", func(context.Context, *Task) (any, error) { return nil, nil })
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if err := bad.Run(rctx); err == nil || !strings.Contains(err.Error(), "unknown or deleted token") || rctx.Err() != nil {
		t.Fatalf("Run with an unknown token: %v", err)
	}
}
