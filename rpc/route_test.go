package rpc

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// Leader routing against fake agents on Unix sockets (the client dials
// endpoints, so the sockets are what is under test): each agent answers
// agent.hello and cluster.status from a shared idea of who leads, and
// counts the calls it received, which is what the tests observe.

type fakeCluster struct {
	t      *testing.T
	dir    string
	leader atomic.Value // string
	index  atomic.Uint64
	agents []*fakeAgent
}

type fakeAgent struct {
	fc      *fakeCluster
	id      string
	ep      string
	srv     *Server
	applied atomic.Uint64 // what cluster.status reports
	// notLeader makes a leader-bound call answer -32004 unless this agent
	// leads (a follower that cannot forward); by default a follower
	// "forwards": it answers as the leader would.
	notLeader atomic.Bool
	claimIn   chan string // a claim arrived: its request id (then it blocks until its connection ends)

	mu    sync.Mutex
	calls map[string]int
}

func newFakeCluster(t *testing.T, n int, leader string) *fakeCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "rpcroute-") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fc := &fakeCluster{t: t, dir: dir}
	fc.leader.Store(leader)
	for i := 1; i <= n; i++ {
		a := &fakeAgent{fc: fc, id: fmt.Sprintf("n%d", i), ep: "unix://" + filepath.Join(dir, fmt.Sprintf("n%d.sock", i)),
			calls: map[string]int{}, claimIn: make(chan string, 8)}
		a.applied.Store(1 << 40) // caught up unless a test says otherwise
		a.start()
		fc.agents = append(fc.agents, a)
	}
	return fc
}

func (fc *fakeCluster) eps(ids ...string) []string {
	var out []string
	for _, a := range fc.agents {
		if len(ids) == 0 {
			out = append(out, a.ep)
		}
		for _, id := range ids {
			if a.id == id {
				out = append(out, a.ep)
			}
		}
	}
	return out
}

func (fc *fakeCluster) agent(id string) *fakeAgent {
	for _, a := range fc.agents {
		if a.id == id {
			return a
		}
	}
	fc.t.Fatalf("no agent %s", id)
	return nil
}

func (a *fakeAgent) start() {
	count := func(m string) {
		a.mu.Lock()
		a.calls[m]++
		a.mu.Unlock()
	}
	leads := func() bool { return a.fc.leader.Load().(string) == a.id }
	write := func(m string) error {
		count(m)
		if a.notLeader.Load() && !leads() {
			return &domain.UnavailableError{Reason: "not the leader", RetryAfter: time.Millisecond}
		}
		return nil
	}
	methods := map[string]Handler{
		MethodHello: Func(func(context.Context, HelloParams) (HelloResult, error) {
			count(MethodHello)
			return HelloResult{ProtocolVersion: ProtocolVersion, NodeID: a.id, LeaderID: a.fc.leader.Load().(string)}, nil
		}),
		MethodClusterStatus: Func(func(context.Context, struct{}) (ClusterStatus, error) {
			count(MethodClusterStatus)
			return ClusterStatus{NodeID: a.id, LeaderID: a.fc.leader.Load().(string), AppliedIndex: a.applied.Load()}, nil
		}),
		MethodRunSubmit: Func(func(_ context.Context, p SubmitParams) (SubmitResult, error) {
			if err := write(MethodRunSubmit); err != nil {
				return SubmitResult{}, err
			}
			return SubmitResult{ID: p.ID, Created: true, Index: a.fc.index.Add(1)}, nil
		}),
		MethodRunGet: Func(func(_ context.Context, p IDParams) (Run, error) {
			count(MethodRunGet)
			return Run{ID: p.ID}, nil
		}),
		MethodTaskClaim: Func(func(ctx context.Context, p ClaimParams) (ClaimResult, error) {
			if err := write(MethodTaskClaim); err != nil {
				return ClaimResult{}, err
			}
			a.claimIn <- p.RequestID
			<-ctx.Done()
			return ClaimResult{}, nil
		}),
	}
	a.srv = NewServer(methods, Options{Logger: quietLogger()})
	_, path, _ := ParseEndpoint(a.ep)
	l, err := net.Listen("unix", path)
	if err != nil {
		a.fc.t.Fatal(err)
	}
	go a.srv.Serve(context.Background(), l)
	a.fc.t.Cleanup(func() { a.srv.Close() })
}

// stop ends the agent: its listener and connections close.
func (a *fakeAgent) stop() { a.srv.Close() }

func (a *fakeAgent) n(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[method]
}

func routeClient(t *testing.T, eps []string, opts ClientOptions) *Client {
	t.Helper()
	opts.Logger = quietLogger()
	if opts.BackoffBase == 0 {
		opts.BackoffBase, opts.BackoffCap = time.Millisecond, 5*time.Millisecond
	}
	c, err := NewClient(eps, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func submit(t *testing.T, c *Client, id string) *SubmitResult {
	t.Helper()
	res, err := c.RunSubmit(testCtx(t), SubmitParams{ID: id, Workflow: []byte(`{}`)})
	if err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	return res
}

func wantCalls(t *testing.T, fc *fakeCluster, method string, want map[string]int) {
	t.Helper()
	for _, a := range fc.agents {
		if got := a.n(method); got != want[a.id] {
			t.Fatalf("%s received %d %s calls, want %d (all: %v)", a.id, got, method, want[a.id], counts(fc, method))
		}
	}
}

func counts(fc *fakeCluster, method string) map[string]int {
	out := map[string]int{}
	for _, a := range fc.agents {
		out[a.id] = a.n(method)
	}
	return out
}

func TestRouteWritesAndReadsGoToTheLeader(t *testing.T) {
	fc := newFakeCluster(t, 3, "n3")
	var connects atomic.Int32
	c := routeClient(t, fc.eps(), ClientOptions{OnConnect: func(string) { connects.Add(1) }})
	for i := range 5 {
		submit(t, c, "r"+strconv.Itoa(i))
	}
	wantCalls(t, fc, MethodRunSubmit, map[string]int{"n3": 5})
	if node, ep := c.Leader(); node != "n3" || ep != fc.agent("n3").ep {
		t.Fatalf("Leader() = %s %s", node, ep)
	}
	// n2's node id is unknown and the leader's endpoint comes after it: the
	// client learnt n2's id on its way (one hello each), no more.
	wantCalls(t, fc, MethodHello, map[string]int{"n1": 1, "n2": 1, "n3": 1})
	// Reads go to the leader too (it has applied every acknowledged
	// write); the current connection stays where it was.
	for range 3 {
		if _, err := c.RunGet(testCtx(t), "r1"); err != nil {
			t.Fatal(err)
		}
	}
	wantCalls(t, fc, MethodRunGet, map[string]int{"n3": 3})
	if c.Endpoint() != fc.agent("n1").ep {
		t.Fatalf("current endpoint %s", c.Endpoint())
	}
	if n := connects.Load(); n != 1 {
		t.Fatalf("OnConnect called %d times, want 1 (the leader connection does not count)", n)
	}
}

func TestRouteReadYourWritesAcrossConnections(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	c := routeClient(t, fc.eps(), ClientOptions{})
	n1 := fc.agent("n1")
	n1.applied.Store(0) // has not applied anything yet
	submit(t, c, "r1")
	for range 3 {
		if _, err := c.RunGet(testCtx(t), "r1"); err != nil {
			t.Fatal(err)
		}
	}
	// The reads went to the leader, which applied the write; the lagging
	// agent was neither read nor asked how far it is.
	wantCalls(t, fc, MethodRunGet, map[string]int{"n2": 3})
	if got := n1.n(MethodClusterStatus); got != 0 {
		t.Fatalf("n1 asked for its status %d times, want 0", got)
	}
}

func TestRouteFollowsTheLeaderWhenItDies(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	c := routeClient(t, fc.eps(), ClientOptions{})
	submit(t, c, "r1")
	fc.leader.Store("n3")
	fc.agent("n2").stop()
	submit(t, c, "r2") // idempotent (it has an id): retried on the new leader
	submit(t, c, "r3")
	wantCalls(t, fc, MethodRunSubmit, map[string]int{"n2": 1, "n3": 2})
	if node, _ := c.Leader(); node != "n3" {
		t.Fatalf("Leader() = %q", node)
	}
}

func TestRouteFollowsTheLeaderOnUnavailable(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	c := routeClient(t, fc.eps(), ClientOptions{LeaderCheck: -1})
	submit(t, c, "r1")
	// Leadership moves; n2 stays up and says -32004 to writes.
	fc.agent("n2").notLeader.Store(true)
	fc.leader.Store("n3")
	submit(t, c, "r2")
	submit(t, c, "r3")
	wantCalls(t, fc, MethodRunSubmit, map[string]int{"n2": 2, "n3": 2})
}

func TestRoutePeriodicCheckFollowsATransfer(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	c := routeClient(t, fc.eps(), ClientOptions{LeaderCheck: time.Millisecond})
	submit(t, c, "r0")
	// n2 steps down but keeps forwarding (its answers stay good): only the
	// periodic check can tell.
	fc.leader.Store("n3")
	i := 0
	testutil.Eventually(t, 10*time.Second, 0, "writes to reach n3", func() error {
		if fc.agent("n3").n(MethodRunSubmit) > 0 {
			return nil
		}
		i++
		submit(t, c, "r"+strconv.Itoa(i))
		return fmt.Errorf("writes still go to n2: %v", counts(fc, MethodRunSubmit))
	})
	before := counts(fc, MethodRunSubmit)
	for i := range 3 {
		submit(t, c, "s"+strconv.Itoa(i))
	}
	before["n3"] += 3
	wantCalls(t, fc, MethodRunSubmit, before)
}

func TestRouteFallsBackWhenTheLeaderIsNotAnEndpoint(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	c := routeClient(t, fc.eps("n1", "n3"), ClientOptions{})
	for i := range 10 {
		submit(t, c, "r"+strconv.Itoa(i))
	}
	// The current agent forwards. Looking for n2 again waits for a backoff
	// and asks only the current agent: n3's node id is known by then.
	wantCalls(t, fc, MethodRunSubmit, map[string]int{"n1": 10})
	if n1, n3 := fc.agent("n1").n(MethodHello), fc.agent("n3").n(MethodHello); n1 < 1 || n1 > 5 || n3 != 1 {
		t.Fatalf("hellos: n1 %d, n3 %d", n1, n3)
	}
	if node, ep := c.Leader(); node != "" || ep != "" {
		t.Fatalf("Leader() = %s %s", node, ep)
	}
}

func TestRouteOffWithOneEndpointOrAny(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	one := routeClient(t, fc.eps("n1"), ClientOptions{})
	anyC := routeClient(t, fc.eps(), ClientOptions{Route: RouteAny})
	submit(t, one, "r1")
	submit(t, anyC, "r2")
	wantCalls(t, fc, MethodRunSubmit, map[string]int{"n1": 2})
	wantCalls(t, fc, MethodHello, nil) // nothing to learn
	if _, err := NewClient(fc.eps(), ClientOptions{Route: "nearest"}); err == nil {
		t.Fatal("an unknown route was accepted")
	}
}

// A claim whose reply is lost is re-sent to the new leader with the same
// request id, so the agent answers the leases the first one may have
// granted instead of leasing more.
func TestRouteResendsALostClaimWithItsRequestID(t *testing.T) {
	fc := newFakeCluster(t, 3, "n2")
	c := routeClient(t, fc.eps(), ClientOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := c.TaskClaim(testCtx(t), ClaimParams{WorkerID: "w", WaitMS: 10000})
		errc <- err
	}()
	first := <-fc.agent("n2").claimIn
	if first == "" {
		t.Fatal("the claim carried no request id")
	}
	fc.leader.Store("n3")
	fc.agent("n2").stop()
	if again := <-fc.agent("n3").claimIn; again != first {
		t.Fatalf("re-sent claim's request id %q, want the first one's %q", again, first)
	}
	c.Close()
	if err := <-errc; err == nil {
		t.Fatal("claim on a closed client succeeded")
	}
	wantCalls(t, fc, MethodTaskClaim, map[string]int{"n2": 1, "n3": 1})
}

// Every method constant of the package (any non-test .go file, so a file
// of new methods needs no change here) has a route, and every route is a
// method constant.
func TestRouteTableCoversEveryMethod(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var decls []ast.Decl
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "rpc" {
			continue
		}
		decls = append(decls, f.Decls...)
	}
	n := 0
	for _, d := range decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if len(name.Name) < 7 || name.Name[:6] != "Method" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				m, _ := strconv.Unquote(lit.Value)
				if _, ok := methodRoutes[m]; !ok {
					t.Errorf("%s (%s) has no route in methodRoutes", name.Name, m)
				}
				n++
			}
		}
	}
	if n != len(methodRoutes) {
		t.Errorf("the package's files have %d method constants, methodRoutes %d routes", n, len(methodRoutes))
	}
	if !LeaderBound(MethodTaskClaim) || LeaderBound(MethodRunGet) || LeaderBound("no.such") {
		t.Error("LeaderBound")
	}
	if classify(MethodRunGet, IDParams{ID: "x", Consistent: true}) != routeLeader || classify(MethodRunStats, IDParams{Consistent: true}) != routeRead {
		t.Error("consistent reads")
	}
}
