package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// Replacing a dead node under load: while producers submit and workers
// claim and complete, a follower is killed with SIGKILL and its data dir
// deleted, it is removed with `remove-peer`, and a fresh agent is added with
// `add-peer`. The leader's log is compacted by then, so the new node catches
// up by snapshot. No work is lost (every submitted run succeeds) or doubled
// (no task is completed twice), and the three members end with the same
// state at the same index.
func TestReplaceDeadFollowerUnderLoad(t *testing.T) {
	t.Setenv("FLOWD_RAFT_SNAPSHOT_THRESHOLD", "64")
	t.Setenv("FLOWD_RAFT_TRAILING_LOGS", "32")
	t.Setenv("FLOWD_RAFT_SNAPSHOT_INTERVAL", "100ms")
	c := startCluster(t, 3)
	leader := c.waitLeader()
	dead := c.followers(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	wf := json.RawMessage(`{"name":"load","tasks":[{"key":"a","type":"load"}]}`)

	var (
		mu        sync.Mutex
		submitted []string
		completed = map[string]int{} // task id -> accepted completions
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		seq       atomic.Int64
		failures  = make(chan error, 16)
	)
	fail := func(err error) {
		select {
		case failures <- err:
		default:
		}
	}
	for p := range 2 {
		cl := c.client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("0193a000-0000-7000-8000-%012x", seq.Add(1))
				// The same id on every retry: a submit whose answer was lost
				// is not submitted twice.
				for ctx.Err() == nil {
					_, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf, ID: id})
					if err == nil {
						break
					}
					if !errors.Is(err, domain.ErrUnavailable) {
						fail(fmt.Errorf("producer %d: submit %s: %w", p, id, err))
						return
					}
				}
				mu.Lock()
				submitted = append(submitted, id)
				mu.Unlock()
			}
		}()
	}
	workers := func(done <-chan struct{}) *sync.WaitGroup {
		var ww sync.WaitGroup
		for w := range 2 {
			cl := c.client()
			ww.Add(1)
			go func() {
				defer ww.Done()
				worker := fmt.Sprintf("w%d", w)
				for ctx.Err() == nil {
					select {
					case <-done:
						return
					default:
					}
					tasks, err := cl.TaskClaim(ctx, rpc.ClaimParams{WorkerID: worker, Types: []string{"load"}, Max: 8, WaitMS: 300})
					if err != nil {
						if !errors.Is(err, domain.ErrUnavailable) {
							fail(fmt.Errorf("%s: claim: %w", worker, err))
							return
						}
						continue
					}
					for _, tk := range tasks {
						for ctx.Err() == nil {
							ack, err := cl.TaskComplete(ctx, rpc.CompleteParams{TaskID: tk.TaskID, FencingToken: tk.FencingToken, Result: json.RawMessage(`"ok"`)})
							if err != nil && errors.Is(err, domain.ErrUnavailable) {
								continue // repeats safely: the fencing token
							}
							if err != nil {
								fail(fmt.Errorf("%s: complete %s: %w", worker, tk.TaskID, err))
								return
							}
							if ack.Accepted {
								mu.Lock()
								completed[tk.TaskID]++
								mu.Unlock()
							}
							break
						}
					}
				}
			}()
		}
		return &ww
	}
	workersDone := make(chan struct{})
	ww := workers(workersDone)
	progress := func(n int) {
		t.Helper()
		for ctx.Err() == nil {
			mu.Lock()
			got := len(completed)
			mu.Unlock()
			if got >= n {
				return
			}
			select {
			case err := <-failures:
				t.Fatal(err)
			case <-time.After(20 * time.Millisecond): // progress of the load goroutines
			}
		}
		t.Fatalf("the load did not reach %d completions", n)
	}
	progress(100)
	began := time.Now()

	// The follower dies for good.
	c.kill9(dead)
	if err := os.RemoveAll(dead.dir); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) {
		t.Helper()
		full := append([]string{"--addr", "unix://" + leader.sock, "--timeout", "20s"}, args...)
		if out, err := exec.Command(flowdBin, full...).CombinedOutput(); err != nil {
			t.Fatalf("flowd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cli("operator", "raft", "remove-peer", dead.id)
	progress(150)
	// Wait until the leader compacted its log, so the new node can only
	// catch up by snapshot.
	waitLog(t, leader, "compacting logs", 30*time.Second)

	// A fresh agent takes its place: a new id and address, an empty data
	// dir, --peers = the current members plus itself.
	fresh := &agent{id: "n4", dir: dead.dir + "-n4", sock: dead.dir + "-n4.sock",
		raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	var members []string
	var live []*agent
	for _, a := range c.agents {
		if a != dead {
			members = append(members, a.id+"="+a.raft)
			live = append(live, a)
		}
	}
	members = append(members, fresh.id+"="+fresh.raft)
	fresh.args = append([]string(nil), leader.args...)
	for i := 0; i < len(fresh.args)-1; i++ {
		switch fresh.args[i] {
		case "--node-id":
			fresh.args[i+1] = fresh.id
		case "--data-dir":
			fresh.args[i+1] = fresh.dir
		case "--raft-addr":
			fresh.args[i+1] = fresh.raft
		case "--forward-addr":
			fresh.args[i+1] = fresh.fwd
		case "--socket":
			fresh.args[i+1] = fresh.sock
		case "--peers":
			fresh.args[i+1] = strings.Join(members, ",")
		}
	}
	c.start(fresh)
	c.agents = append(live, fresh)
	cli("operator", "raft", "add-peer", fresh.id, fresh.raft)
	waitLog(t, fresh, "installed remote snapshot", 30*time.Second)
	replaced := time.Since(began)
	mu.Lock()
	atAdd := len(completed)
	mu.Unlock()
	progress(atAdd + 100) // the load goes on with the new member

	// Stop producing, let the workers drain, then check every run.
	close(stop)
	wg.Wait()
	select {
	case err := <-failures:
		t.Fatal(err)
	default:
	}
	mu.Lock()
	ids := append([]string(nil), submitted...)
	mu.Unlock()
	progress(len(ids))
	close(workersDone)
	ww.Wait()
	select {
	case err := <-failures:
		t.Fatal(err)
	default:
	}
	cl := c.client(leader)
	for _, id := range ids {
		r, err := cl.RunGet(ctx, id)
		if err != nil || r.State != domain.RunSucceeded {
			t.Fatalf("run %s: %v %v (lost work)", id, r, err)
		}
	}
	for task, n := range completed {
		if n != 1 {
			t.Fatalf("task %s completed %d times (doubled work)", task, n)
		}
	}
	if len(completed) != len(ids) {
		t.Fatalf("%d tasks completed for %d runs", len(completed), len(ids))
	}
	if st := c.status(leader); st == nil || len(st.Peers) != 3 {
		t.Fatalf("configuration: %+v", st)
	}
	sameState(t, c)
	t.Logf("%d runs submitted and completed once each; %s killed, removed, and replaced by %s (caught up by snapshot) in %s under load",
		len(ids), dead.id, fresh.id, replaced.Round(time.Millisecond))
}

// waitLog waits until an agent's log contains text (case-insensitive).
func waitLog(t *testing.T, a *agent, text string, d time.Duration) {
	t.Helper()
	// another process's log file
	testutil.Eventually(t, d, 50*time.Millisecond, fmt.Sprintf("%s to log %q", a.id, text), func() error {
		b, _ := os.ReadFile(a.dir + ".log")
		if strings.Contains(strings.ToLower(string(b)), text) {
			return nil
		}
		return fmt.Errorf("the log ends:\n%s", tail(string(b), 20))
	})
}
