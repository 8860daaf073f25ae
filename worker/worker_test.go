package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/rpc"
)

// The SDK against three in-process agents (real raft, badger, sockets).

func startCluster(t *testing.T) []string { return startAgents(t).Eps }

// startAgents starts three in-process agents, each with an HTTP listener
// for its metrics.
func startAgents(t *testing.T) *testagents.Cluster { return testagents.Start(t, 3, nil) }

type env struct {
	t   *testing.T
	eps []string
	c   *rpc.Client
}

func newEnv(t *testing.T) *env {
	eps := startCluster(t)
	c, err := rpc.NewClient(eps, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &env{t: t, eps: eps, c: c}
}

func (e *env) submit(wf string) string {
	e.t.Helper()
	res, err := e.c.RunSubmit(context.Background(), rpc.SubmitParams{Workflow: json.RawMessage(wf)})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.ID
}

func (e *env) wait(id string) *rpc.Run {
	e.t.Helper()
	w, err := e.c.RunWait(context.Background(), id, 20000)
	if err != nil || !w.Done {
		e.t.Fatalf("wait %s: %+v %v", id, w, err)
	}
	r, err := e.c.RunGet(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) task(id string) *rpc.Task {
	tk, err := e.c.TaskGet(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return tk
}

// start runs w until the test ends (or stop is called).
func (e *env) start(w *Worker) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	e.t.Cleanup(func() { w.Stop(); _ = stop() })
	return stop
}

func (e *env) worker(opts Options) *Worker {
	if opts.ID == "" {
		opts.ID = "w-" + e.t.Name()
	}
	opts.ClaimWait = 2 * time.Second
	w, err := New(e.eps, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

func TestHandlerSeesInputDepsAttemptAndKey(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{})
	var mu sync.Mutex
	seen := map[string]*Task{}
	w.Register("t", func(_ context.Context, task *Task) (any, error) {
		mu.Lock()
		seen[task.Key] = task
		mu.Unlock()
		var in struct{ N int }
		_ = task.Decode(&in)
		return map[string]int{"n": in.N * 10}, nil
	})
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"a","type":"t","input":{"n":4}},{"key":"b","type":"t","deps":["a"]}]}`)
	if r := e.wait(id); r.State != domain.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
	mu.Lock()
	defer mu.Unlock()
	b := seen["b"]
	if string(b.DepResults["a"]) != `{"n":40}` || b.Attempt != 1 || b.IdempotencyKey() != id+"/b/1" {
		t.Fatalf("b saw deps %s attempt %d key %s", b.DepResults, b.Attempt, b.IdempotencyKey())
	}
}

func TestPermanentErrorAndPanic(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{})
	w.Register("perm", func(context.Context, *Task) (any, error) { return nil, Permanent(errors.New("bad input")) })
	w.Register("boom", func(context.Context, *Task) (any, error) { panic("kaboom") })
	w.Register("ok", func(context.Context, *Task) (any, error) { return "fine", nil })
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"p","type":"perm","retry":{"max_attempts":3}}]}`)
	if r := e.wait(id); r.State != domain.RunFailed || e.task(id+"/p").Attempt != 1 {
		t.Fatalf("permanent error retried: %s attempt %d", r.State, e.task(id+"/p").Attempt)
	}
	id = e.submit(`{"tasks":[{"key":"x","type":"boom","retry":{"max_attempts":1}}]}`)
	e.wait(id)
	if tk := e.task(id + "/x"); !strings.Contains(tk.Error, "handler panic: kaboom") {
		t.Fatalf("panic error %q", tk.Error)
	}
	id = e.submit(`{"tasks":[{"key":"y","type":"ok"}]}`)
	if r := e.wait(id); r.State != domain.RunSucceeded {
		t.Fatalf("worker stopped serving after a panic: %s", r.State)
	}
}

func TestLeaseLossCancelsHandlerAndDiscardsResult(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{})
	started := make(chan string, 1)
	cause := make(chan error, 1)
	w.Register("slow", func(ctx context.Context, task *Task) (any, error) {
		started <- task.RunID
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return "too late", nil
	})
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"s","type":"slow","lease_ms":600}]}`)
	<-started
	if _, err := e.c.RunVerb(context.Background(), rpc.MethodRunCancel, id, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("handler context cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler context not cancelled after its lease was revoked")
	}
	if tk := e.task(id + "/s"); tk.State != domain.TaskCancelled || tk.Result != nil {
		t.Fatalf("task %s result %s", tk.State, tk.Result)
	}
}

func TestDrainFinishesInFlightAndStopsClaiming(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{Concurrency: 2})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	w.Register("job", func(ctx context.Context, task *Task) (any, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	})
	stop := e.start(w)
	id := e.submit(`{"tasks":[{"key":"a","type":"job"}]}`)
	<-started
	drained := make(chan error, 1)
	go func() { drained <- stop() }()
	// Submitted once the worker has stopped claiming (its last long poll
	// answered): it must stay ready, not leased to us.
	<-w.claiming
	later := e.submit(`{"tasks":[{"key":"b","type":"job"}]}`)
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if r := e.wait(id); r.State != domain.RunSucceeded {
		t.Fatalf("in-flight task not finished by the drain: %s", r.State)
	}
	if tk := e.task(later + "/b"); tk.State != domain.TaskReady || tk.Attempt != 0 {
		t.Fatalf("task submitted during the drain is %s (attempt %d)", tk.State, tk.Attempt)
	}
}

func TestUnknownTypeFailsNamingRegistered(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{AnyType: true})
	w.Register("known", func(context.Context, *Task) (any, error) { return nil, nil })
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"u","type":"mystery","retry":{"max_attempts":3}}]}`)
	r := e.wait(id)
	tk := e.task(id + "/u")
	if r.State != domain.RunFailed || tk.Attempt != 1 || !strings.Contains(tk.Error, `"mystery"`) || !strings.Contains(tk.Error, "known") {
		t.Fatalf("run %s attempt %d error %q", r.State, tk.Attempt, tk.Error)
	}
}

func TestSpawnFanOut(t *testing.T) {
	e := newEnv(t)
	w := e.worker(Options{Concurrency: 8})
	w.Register("split", func(_ context.Context, task *Task) (any, error) {
		for i := 0; i < 5; i++ {
			if err := task.Spawn(domain.TaskSpec{Key: fmt.Sprintf("c%d", i), Type: "child"}); err != nil {
				return nil, err
			}
		}
		return "split", nil
	})
	w.Register("child", func(_ context.Context, task *Task) (any, error) { return task.Key, nil })
	w.Register("join", func(_ context.Context, task *Task) (any, error) { return len(task.DepResults), nil })
	e.start(w)
	id := e.submit(`{"tasks":[{"key":"s","type":"split"},{"key":"j","type":"join","deps":["s"]}]}`)
	if r := e.wait(id); r.State != domain.RunSucceeded || string(e.task(id+"/j").Result) != "6" {
		t.Fatalf("run %s join %s", r.State, e.task(id+"/j").Result)
	}
}

func TestProtocolMismatchFailsFast(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(map[string]rpc.Handler{
		rpc.MethodHello: rpc.Func(func(context.Context, rpc.HelloParams) (rpc.HelloResult, error) {
			return rpc.HelloResult{ProtocolVersion: 99, NodeID: "future"}, nil
		}),
	}, rpc.Options{})
	go srv.Serve(context.Background(), l)
	defer srv.Close()
	w, err := New([]string{"unix://" + sock}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Register("t", func(context.Context, *Task) (any, error) { return nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "protocol mismatch") || ctx.Err() != nil {
		t.Fatalf("Run: %v", err)
	}
}
