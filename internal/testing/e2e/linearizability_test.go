package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Linearizability of the run lifecycle (porcupine): concurrent clients on
// different agents submit runs with chosen ids, read them with
// consistent: true and cancel them, while the leader is killed with
// SIGKILL and restarted. Every history must be explainable by one
// sequential order consistent with real time. Calls whose outcome is
// unknown (the agent died, no leader in time) may or may not have
// happened; the checker allows both.

type linInput struct {
	Op string // submit | get | cancel
	ID string
}

type linOutput struct {
	Unknown bool
	Created bool   // submit
	State   string // get, cancel: "absent" when the run does not exist
	Changed bool   // cancel
}

var lifecycleModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byID := map[string][]porcupine.Operation{}
		var ids []string
		for _, op := range history {
			id := op.Input.(linInput).ID
			if _, ok := byID[id]; !ok {
				ids = append(ids, id)
			}
			byID[id] = append(byID[id], op)
		}
		var out [][]porcupine.Operation
		for _, id := range ids {
			out = append(out, byID[id])
		}
		return out
	},
	Init: func() []any { return []any{"absent"} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(string), input.(linInput), output.(linOutput)
		switch in.Op {
		case "submit":
			next := s
			if s == "absent" {
				next = "running"
			}
			if out.Unknown {
				return []any{s, next}
			}
			if out.Created == (s == "absent") {
				return []any{next}
			}
		case "get":
			if out.Unknown || out.State == s {
				return []any{s}
			}
		case "cancel":
			next := s
			if s == "running" {
				next = "cancelled"
			}
			if out.Unknown {
				return []any{s, next}
			}
			switch {
			case s == "absent" && out.State == "absent",
				s == "running" && out.Changed,
				s == "cancelled" && !out.Changed && out.State != "absent":
				return []any{next}
			}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%s(%s) -> %+v", input.(linInput).Op, input.(linInput).ID[len(input.(linInput).ID)-4:], output)
	},
}

func TestRunLifecycleIsLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	c := startCluster(t, 3)
	wf := json.RawMessage(`{"tasks":[{"key":"t","type":"nobody-serves-this"}]}`)
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, fmt.Sprintf("0193c000-0000-7000-8000-%012d", i+1))
	}
	var mu sync.Mutex
	var history []porcupine.Operation
	answered := 0
	progress := make(chan struct{}, 1)
	record := func(client int, in linInput, call time.Time, out linOutput) {
		ret := time.Now().UnixNano()
		if out.Unknown {
			ret = math.MaxInt64 // may have taken effect at any time after the call
		}
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call.UnixNano(), Output: out, Return: ret})
		if !out.Unknown {
			answered++
		}
		mu.Unlock()
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	// waitAnswered blocks until n more operations got an answer.
	waitAnswered := func(n int) {
		mu.Lock()
		goal := answered + n
		mu.Unlock()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			done := answered >= goal
			mu.Unlock()
			if done {
				return
			}
			select {
			case <-progress:
			case <-deadline:
				t.Fatalf("fewer than %d operations answered in 30s", n)
			}
		}
	}
	outcome := func(err error) (linOutput, bool) {
		var ce *rpc.ConnError
		switch {
		case errors.As(err, &ce) && ce.NotSent:
			return linOutput{}, false // never reached an agent: not part of the history
		case err == nil:
			return linOutput{}, true
		case errors.Is(err, domain.ErrNotFound):
			return linOutput{State: "absent"}, true
		default:
			return linOutput{Unknown: true}, false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			a := c.agents[w%len(c.agents)]
			cl, err := rpc.NewClient([]string{"unix://" + a.sock}, rpc.ClientOptions{MaxAttempts: 1})
			if err != nil {
				return
			}
			defer cl.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			notSent := func(err error) bool {
				var ce *rpc.ConnError
				if errors.As(err, &ce) && ce.NotSent {
					select { // our agent is down: pace the retries
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					return true
				}
				return false
			}
			for ctx.Err() == nil {
				in := linInput{ID: ids[rng.IntN(len(ids))]}
				octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
				t0 := time.Now()
				switch rng.IntN(3) {
				case 0:
					in.Op = "submit"
					res, err := cl.RunSubmit(octx, rpc.SubmitParams{ID: in.ID, Workflow: wf})
					if notSent(err) {
						break
					}
					out, _ := outcome(err)
					if err == nil {
						out.Created = res.Created
					}
					record(w, in, t0, out)
				case 1:
					in.Op = "get"
					var r rpc.Run
					err := cl.CallIdempotent(octx, rpc.MethodRunGet, rpc.IDParams{ID: in.ID, Consistent: true}, &r)
					if notSent(err) {
						break
					}
					out, _ := outcome(err)
					if err == nil {
						out.State = string(r.State)
					}
					record(w, in, t0, out)
				case 2:
					in.Op = "cancel"
					res, err := cl.RunVerb(octx, rpc.MethodRunCancel, in.ID, "")
					if notSent(err) {
						break
					}
					out, _ := outcome(err)
					if err == nil {
						out.Changed, out.State = res.Changed, "exists"
					}
					record(w, in, t0, out)
				}
				ocancel()
			}
		}(w)
	}
	// Chaos: kill the leader, let the others go on, bring it back.
	waitAnswered(1000) // some history before the crash
	leader := c.waitLeader()
	c.kill9(leader)
	c.waitLeader(leader)
	waitAnswered(1000) // the survivors go on
	c.restart(leader)
	c.waitLeader()
	waitAnswered(1000) // and with the node back
	cancel()
	wg.Wait()
	known := 0
	for _, op := range history {
		if !op.Output.(linOutput).Unknown {
			known++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(lifecycleModel.ToModel(), history, time.Minute)
	if res != porcupine.Ok {
		path := t.TempDir() + "/history.html"
		_ = porcupine.VisualizePath(lifecycleModel.ToModel(), info, path)
		t.Fatalf("history of %d operations is %s (visualization: %s)", len(history), res, path)
	}
	if known < 50 {
		t.Fatalf("only %d operations completed; the test checked little", known)
	}
	t.Logf("%d operations (%d with a known outcome) are linearizable", len(history), known)
}
