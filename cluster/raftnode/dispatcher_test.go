package raftnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// oneNodeLeader starts a one-node test cluster and returns its leader once
// it serves, with a context for the test's calls.
func oneNodeLeader(t *testing.T, timeout time.Duration) (*Node, context.Context) {
	t.Helper()
	l := NewTestCluster(t, 1, nil).Leader()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if err := l.WaitLeaderReady(ctx); err != nil {
		t.Fatal(err)
	}
	return l, ctx
}

// waitHeld waits until l holds n long-polling claims, woken by the
// dispatcher each time it holds one.
func waitHeld(t *testing.T, l *Node, n int) {
	t.Helper()
	held := make(chan struct{}, 1)
	hook := func() {
		select {
		case held <- struct{}{}:
		default:
		}
	}
	l.disp.heldHook.Store(&hook)
	defer l.disp.heldHook.Store(nil)
	timeout := time.After(5 * time.Second)
	for l.WaitingClaims() != n {
		select {
		case <-held:
		case <-timeout:
			t.Fatalf("%d claims held, want %d", l.WaitingClaims(), n)
		}
	}
}

// A claim that stopped waiting while its entry was in flight (its caller
// was answered -32004, outcome unknown) leased a task under its request id.
// The worker re-sends that request id; it must get that lease, whether the
// entry settled before the re-sent claim was held (answered from state) or
// after (the re-sent claim inherits the outcome). Before, the re-sent claim
// waited for ready work, found none (the lease took the only task) and
// answered nothing; the worker then forgot the request id, and the task
// sat leased to nobody until the lease expired.
func TestResentClaimGetsTheLeaseItsFirstDeliveryGaveUpOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		// heldFirst: the re-sent claim is held before the first delivery's
		// entry settles.
		heldFirst bool
	}{{"settled-before-resend", false}, {"settles-while-resend-waits", true}} {
		t.Run(tc.name, func(t *testing.T) {
			l, ctx := oneNodeLeader(t, 30*time.Second)
			_, idx, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.WaitForApplied(ctx, idx); err != nil {
				t.Fatal(err)
			}

			entered, gate := make(chan struct{}, 1), make(chan struct{})
			l.disp.beforePropose = func() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-gate
			}
			w := fsm.Waiter{WorkerID: "w", Max: 1, RequestID: "req-1"}
			firstCtx, giveUp := context.WithCancel(ctx)
			first := make(chan error, 1)
			go func() {
				tasks, err := l.Claim(firstCtx, w, 0)
				if err == nil && len(tasks) > 0 {
					err = errors.New("the first delivery got its tasks")
				}
				first <- err
			}()
			<-entered // the first delivery's claim entry is about to be proposed
			giveUp()
			if err := <-first; !errors.Is(err, domain.ErrUnavailable) {
				t.Fatalf("first delivery: %v, want an unavailable error (outcome unknown)", err)
			}

			type outcome struct {
				tasks []fsm.Claimed
				err   error
			}
			resent := make(chan outcome, 1)
			resend := func() {
				go func() {
					rctx, stop := context.WithTimeout(ctx, 10*time.Second)
					defer stop()
					tasks, err := l.Claim(rctx, w, time.Second)
					resent <- outcome{tasks, err}
				}()
			}
			if tc.heldFirst {
				resend()
				waitHeld(t, l, 2)
				close(gate)
			} else {
				close(gate)
				testutil.EventuallyTrue(t, 5*time.Second, time.Millisecond, "the first delivery's entry to lease the task", func() bool {
					got, err := l.fsm.ClaimedBy(w.WorkerID, w.RequestID)
					if err != nil {
						t.Fatal(err)
					}
					return len(got) > 0
				})
				resend()
			}
			out := <-resent
			if out.err != nil {
				t.Fatal(out.err)
			}
			leased, err := l.fsm.ClaimedBy(w.WorkerID, w.RequestID)
			if err != nil || len(leased) != 1 {
				t.Fatalf("leases of the request: %+v, %v; want one", leased, err)
			}
			if len(out.tasks) != 1 || out.tasks[0].TaskID != leased[0].TaskID || out.tasks[0].FencingToken != leased[0].FencingToken {
				t.Fatalf("re-sent claim answered %+v, want the lease %s token %d", out.tasks, leased[0].TaskID, leased[0].FencingToken)
			}
		})
	}
}

// A claim delivered twice while both deliveries are held (a forwarding
// agent was killed; the leader has not noticed its connection is gone,
// and the worker re-sent the request id through another agent): when one
// delivery's entry leases the task, the other is answered the same lease.
// Before, only the delivery nobody listened to got it; the re-send waited
// for ready work the lease took, answered nothing, and the worker forgot
// the request id.
func TestDuplicateHeldClaimsShareTheirLease(t *testing.T) {
	l, ctx := oneNodeLeader(t, 30*time.Second)
	w := fsm.Waiter{WorkerID: "w", Max: 1, RequestID: "req-1"}
	type outcome struct {
		tasks []fsm.Claimed
		err   error
	}
	got := make(chan outcome, 2)
	for range 2 {
		go func() {
			cctx, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			tasks, err := l.Claim(cctx, w, time.Second)
			got <- outcome{tasks, err}
		}()
	}
	waitHeld(t, l, 2)
	// One ready task: the submit's entry claims it for one waiter only.
	if _, _, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)}); err != nil {
		t.Fatal(err)
	}
	a, b := <-got, <-got
	for _, o := range []outcome{a, b} {
		if o.err != nil || len(o.tasks) != 1 || o.tasks[0].TaskID != "r/x" {
			t.Fatalf("deliveries answered %+v and %+v; want both the lease of r/x", a, b)
		}
	}
	if a.tasks[0].FencingToken != b.tasks[0].FencingToken {
		t.Fatalf("tokens %d and %d; want one lease", a.tasks[0].FencingToken, b.tasks[0].FencingToken)
	}
}

// A new leader renews the leases no worker has acknowledged (its first
// command after the barrier, fsm.NewTerm): the claim's answer may have been
// lost with the old leader, and the worker's re-sent claim needs the
// election and its client's patience to arrive before the lease ends.
func TestNewLeaderRenewsUnacknowledgedLeases(t *testing.T) {
	c := NewTestCluster(t, 3, nil)
	c.Propose(&fsm.Submit{ID: "r", Spec: mustSpec(t, `{"tasks":[{"key":"x","type":"t","lease_ms":60000}]}`)})
	got := claim(t, c, "w1", 1)
	if len(got) != 1 {
		t.Fatalf("claimed %+v", got)
	}
	before := got[0].LeaseExpiresAt
	old := c.Leader()
	c.Kill(old)
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.WaitLeaderReady(ctx); err != nil {
		t.Fatal(err)
	}
	// WaitLeaderReady returns once the loops run, after the renewal.
	tk, err := l.FSM().GetTask("r/x")
	if err != nil {
		t.Fatal(err)
	}
	if tk.LeaseExpiresAt <= before || tk.FencingToken != got[0].FencingToken {
		t.Fatalf("lease after the new term: token %d until %d; want token %d renewed past %d", tk.FencingToken, tk.LeaseExpiresAt, got[0].FencingToken, before)
	}
}
