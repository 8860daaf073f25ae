package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster/raftnode"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// The raft node satisfies the daemon's view of a node.
var _ Node = (*raftnode.Node)(nil)

// withRaft is c with the raft node as its OpenNode: what cmd/flowd's agent
// command does.
func withRaft(c Config) Config {
	c.OpenNode = NodeOpener(raftnode.Open)
	return c
}

// raftNode is a's node as the raft implementation, for what only tests
// ask of it (WaitForLeader).
func raftNode(a *Agent) *raftnode.Node { return a.node.(*raftnode.Node) }

// seamAgent is an agent wired around p and s only (no listeners, no
// sockets): what the handlers see through the seam.
func seamAgent(nodeID string, p proposer, s stateReader) *Agent {
	a := newAgent(Config{NodeID: nodeID}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.wire(p, s)
	return a
}

// oneNodeAgent runs the handlers against a one-node in-memory test cluster
// (the node is the agent's Node too, so /metrics' collectors and the
// operator methods answer).
func oneNodeAgent(t *testing.T) (*Agent, *raftnode.Node) {
	t.Helper()
	n := raftnode.NewTestCluster(t, 1, nil).Leader()
	a := seamAgent(n.ID(), n, n.FSM())
	a.node = n
	return a, n
}

// The handlers, called directly, over a one-node cluster: submit, claim
// (at once and long-polled), complete (with a stale token, then for real),
// get.
func TestHandlersOnOneNodeCluster(t *testing.T) {
	a, node := oneNodeAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sub, err := a.runSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(
		`{"name":"pair","tasks":[{"key":"a","type":"echo"},{"key":"b","type":"echo","deps":["a"]}]}`)})
	if err != nil || sub.ID == "" || sub.Index == 0 {
		t.Fatalf("submit: %+v %v", sub, err)
	}
	if _, err := a.runSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t","deps":["a"]}]}`)}); !errors.Is(err, domain.ErrInvalidSpec) {
		t.Fatalf("submit of a bad spec: %v, want ErrInvalidSpec", err)
	}

	// No wait: one claim entry, since a is ready.
	first, err := a.taskClaim(ctx, rpc.ClaimParams{WorkerID: "w"})
	if err != nil || len(first.Tasks) != 1 || first.Tasks[0].TaskKey != "a" {
		t.Fatalf("claim without a wait: %+v %v", first, err)
	}
	a1 := first.Tasks[0]
	// Nothing else is ready until a completes.
	if none, err := a.taskClaim(ctx, rpc.ClaimParams{WorkerID: "w"}); err != nil || len(none.Tasks) != 0 {
		t.Fatalf("claim with nothing ready: %+v %v", none, err)
	}
	// A stale token loses (accepted: false), it is not an error.
	if ack, err := a.taskComplete(ctx, rpc.CompleteParams{TaskID: a1.TaskID, FencingToken: a1.FencingToken + 1}); err != nil || ack.Accepted {
		t.Fatalf("complete with a stale token: %+v %v", ack, err)
	}

	// A long poll held on the node, answered by the completion of a.
	type claimed struct {
		res rpc.ClaimResult
		err error
	}
	polled := make(chan claimed, 1)
	go func() {
		res, err := a.taskClaim(ctx, rpc.ClaimParams{WorkerID: "w2", WaitMS: 10_000})
		polled <- claimed{res, err}
	}()
	testutil.EventuallyTrue(t, 5*time.Second, 10*time.Millisecond, "the claim waits", func() bool { return node.WaitingClaims() == 1 })
	ack, err := a.taskComplete(ctx, rpc.CompleteParams{TaskID: a1.TaskID, FencingToken: a1.FencingToken, Result: json.RawMessage(`{"n":1}`)})
	if err != nil || !ack.Accepted || ack.Index == 0 {
		t.Fatalf("complete a: %+v %v", ack, err)
	}
	got := <-polled
	if got.err != nil || len(got.res.Tasks) != 1 || got.res.Tasks[0].TaskKey != "b" {
		t.Fatalf("long-polled claim: %+v %v", got.res, got.err)
	}
	b := got.res.Tasks[0]
	if string(b.DepResults["a"]) != `{"n":1}` {
		t.Fatalf("b's dependency results: %s", b.DepResults)
	}
	if ack, err := a.taskComplete(ctx, rpc.CompleteParams{TaskID: b.TaskID, FencingToken: b.FencingToken}); err != nil || !ack.Accepted {
		t.Fatalf("complete b: %+v %v", ack, err)
	}

	run, err := a.runGet(ctx, rpc.IDParams{ID: sub.ID[:8]})
	if err != nil || run.ID != sub.ID || run.State != domain.RunSucceeded || len(run.Tasks) != 2 {
		t.Fatalf("run.get: %+v %v", run, err)
	}
	if run, err = a.runGet(ctx, rpc.IDParams{ID: sub.ID, Consistent: true}); err != nil || run.State != domain.RunSucceeded {
		t.Fatalf("consistent run.get: %+v %v", run, err)
	}
	task, err := a.taskGet(ctx, rpc.TaskIDParams{ID: a1.TaskID})
	if err != nil || task.State != domain.TaskSucceeded || string(task.Result) != `{"n":1}` || len(task.Attempts) != 1 {
		t.Fatalf("task.get: %+v %v", task, err)
	}
	// A verb that cannot apply is refused before anything is proposed.
	if _, err := a.verb(rpc.MethodRunInterrupt)(ctx, rpc.VerbParams{ID: sub.ID}); !errors.Is(err, domain.ErrIllegalTransition) {
		t.Fatalf("interrupt a finished run: %v, want ErrIllegalTransition", err)
	}
}

// fakeProposer answers every proposal with res (and leads, ready at once);
// anything else it is asked panics (the nil embedded interface).
type fakeProposer struct {
	proposer
	res any
	idx uint64
	err error
}

func (f fakeProposer) Propose(context.Context, fsm.Command) (any, uint64, error) {
	return f.res, f.idx, f.err
}

func (f fakeProposer) ProposeGrouped(ctx context.Context, cmd fsm.Command) (any, uint64, error) {
	return f.Propose(ctx, cmd)
}
func (fakeProposer) IsLeader() bool                        { return true }
func (fakeProposer) LeaderEpoch() context.Context          { return context.Background() }
func (fakeProposer) WaitLeaderReady(context.Context) error { return nil }

// fakeState has a task ready for every waiter; anything else it is asked
// panics.
type fakeState struct{ stateReader }

func (fakeState) HasReady(fsm.Waiter, int64) bool                 { return true }
func (fakeState) Now() int64                                      { return 0 }
func (fakeState) ClaimedBy(string, string) ([]fsm.Claimed, error) { return nil, nil }

func TestProposeTyped(t *testing.T) {
	ctx := context.Background()
	cmd := &fsm.Heartbeat{TaskID: "r/a", Token: 3}
	for _, mode := range []proposeMode{alone, grouped} {
		ack, idx, err := propose[fsm.AckResult](ctx, fakeProposer{res: &fsm.AckResult{Accepted: true}, idx: 7}, cmd, mode)
		if err != nil || !ack.Accepted || idx != 7 {
			t.Fatalf("mode %d: %+v %d %v", mode, ack, idx, err)
		}
	}
	// An error result passes through with its index.
	stale := errors.New("stale")
	if ack, idx, err := propose[fsm.AckResult](ctx, fakeProposer{idx: 8, err: stale}, cmd, grouped); ack != nil || idx != 8 || err != stale {
		t.Fatalf("error result: %+v %d %v", ack, idx, err)
	}
	// A result of another type, none, or a nil pointer: an error, no panic.
	for _, res := range []any{&fsm.ChangedResult{Changed: true}, fsm.AckResult{}, nil, (*fsm.AckResult)(nil)} {
		ack, idx, err := propose[fsm.AckResult](ctx, fakeProposer{res: res, idx: 9}, cmd, grouped)
		if ack != nil || idx != 9 || !errors.Is(err, ErrUnexpectedResult) {
			t.Fatalf("result %T: %+v %d %v, want ErrUnexpectedResult", res, ack, idx, err)
		}
		if code := rpc.ToError(err).Code; code != rpc.CodeInternal {
			t.Fatalf("result %T: code %d, want internal (%d)", res, code, rpc.CodeInternal)
		}
	}
}

// A handler whose proposal answers with the wrong type reports an internal
// error instead of panicking the agent.
func TestHandlerUnexpectedResult(t *testing.T) {
	ctx := context.Background()
	a := seamAgent("n1", fakeProposer{res: &fsm.SubmitResult{}, idx: 4}, fakeState{})
	if _, err := a.taskHeartbeat(ctx, rpc.HeartbeatParams{TaskID: "r/a", FencingToken: 1}); !errors.Is(err, ErrUnexpectedResult) {
		t.Fatalf("task.heartbeat: %v, want ErrUnexpectedResult", err)
	}
	if _, err := a.queueSet(ctx, rpc.QueueSetParams{Name: "q"}); !errors.Is(err, ErrUnexpectedResult) {
		t.Fatalf("queue.set: %v, want ErrUnexpectedResult", err)
	}
	if _, err := a.settingsSet(ctx, rpc.Settings{}); !errors.Is(err, ErrUnexpectedResult) {
		t.Fatalf("settings.set: %v, want ErrUnexpectedResult", err)
	}
	if _, err := a.taskClaim(ctx, rpc.ClaimParams{WorkerID: "w"}); !errors.Is(err, ErrUnexpectedResult) {
		t.Fatalf("task.claim: %v, want ErrUnexpectedResult", err)
	}
	// The right type, but no assignment for the one waiter (indexing it
	// would panic).
	a = seamAgent("n1", fakeProposer{res: &fsm.ClaimResult{}, idx: 5}, fakeState{})
	if _, err := a.taskClaim(ctx, rpc.ClaimParams{WorkerID: "w"}); !errors.Is(err, ErrUnexpectedResult) {
		t.Fatalf("task.claim answered for no waiter: %v, want ErrUnexpectedResult", err)
	}
}
