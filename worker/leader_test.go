package worker

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/internal/testing/testutil"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Leader routing, observed through the agents' own metrics:
// flowd_rpc_requests_total counts the requests an agent received from
// clients (a follower counts what it then forwards; what reaches the leader
// over the forwarding listener is not counted). With every write going
// straight to the leader, the followers count none.

var requestLine = regexp.MustCompile(`^flowd_rpc_requests_total\{.*method="([^"]+)".*\} (\S+)$`)

// requests scrapes an agent's per-method request counts (summed over
// result codes).
func requests(t *testing.T, a *daemon.Agent) map[string]int {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + a.Config().HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if m := requestLine.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", sc.Text(), err)
			}
			out[m[1]] += int(v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// leaderBound are the methods this test's clients make that run on the
// leader.
var leaderBound = []string{rpc.MethodRunSubmit, rpc.MethodRunWait, rpc.MethodTaskClaim, rpc.MethodTaskComplete}

// phase runs n two-task runs to success and reports, per live agent, how
// many leader-bound requests it received from clients meanwhile, and
// whether one agent led throughout.
func (e *env) phase(ta *testagents.Cluster, live []int, n int) (deltas map[int]map[string]int, leader int, stable bool) {
	e.t.Helper()
	leaderNow := func() (int, uint64) {
		var changes uint64
		who := -1
		for _, i := range live {
			changes += ta.Agents[i].Node().LeaderChanges()
			if ta.Agents[i].Node().IsLeader() {
				who = i
			}
		}
		return who, changes
	}
	before := map[int]map[string]int{}
	for _, i := range live {
		before[i] = requests(e.t, ta.Agents[i])
	}
	l0, c0 := leaderNow()
	for range n {
		id := e.submit(`{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)
		if r := e.wait(id); r.State != domain.RunSucceeded {
			e.t.Fatalf("run %s", r.State)
		}
	}
	l1, c1 := leaderNow()
	deltas = map[int]map[string]int{}
	for _, i := range live {
		after := requests(e.t, ta.Agents[i])
		deltas[i] = map[string]int{}
		for _, m := range leaderBound {
			deltas[i][m] = after[m] - before[i][m]
		}
	}
	return deltas, l1, l0 == l1 && l1 >= 0 && c0 == c1
}

// clean: every leader-bound request of the phase reached the leader
// directly (n runs: n submits, two completions each; an agent counts a
// request when its handler returns, so the last completion of a phase may
// be counted in the next one: run.wait can answer first).
func clean(deltas map[int]map[string]int, leader, n int) bool {
	for i, d := range deltas {
		for m, v := range d {
			if i != leader && v != 0 {
				return false
			}
			if i == leader && (m == rpc.MethodRunSubmit && v != n || m == rpc.MethodTaskComplete && v < 2*n-1 || v == 0) {
				return false
			}
		}
	}
	return true
}

func nodeID(a *daemon.Agent) string { return a.Config().NodeID }

func TestWorkerAndClientTalkToTheLeaderAndFollowIt(t *testing.T) {
	ta := startAgents(t)
	c, err := rpc.NewClient(ta.Eps, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &env{t: t, eps: ta.Eps, c: c}
	w := e.worker(Options{Concurrency: 4})
	w.Register("t", func(context.Context, *Task) (any, error) { return "ok", nil })
	e.start(w)
	live := []int{0, 1, 2}

	// Every submit, wait, claim and completion goes to the leader, none
	// through a follower. (An election during the phase would send some
	// through the others legitimately: then the phase is run again.)
	var deltas map[int]map[string]int
	var leader int
	for try := 0; ; try++ {
		var stable bool
		deltas, leader, stable = e.phase(ta, live, 3)
		if stable {
			break
		}
		if try == 3 {
			t.Fatalf("the leader kept changing: %v", deltas)
		}
	}
	if !clean(deltas, leader, 3) {
		t.Fatalf("leader %s; leader-bound requests each agent received: %v", nodeID(ta.Agents[leader]), deltas)
	}
	if node, _ := c.Leader(); node != nodeID(ta.Agents[leader]) {
		t.Fatalf("client routes to %q, leader is %s", node, nodeID(ta.Agents[leader]))
	}

	// Stop the leader (it hands leadership over first). Calls keep
	// succeeding, and the clients re-route to the new leader: a phase in
	// which every leader-bound request reached it directly comes.
	old := leader
	ta.Stops[old]()
	live = nil
	for i := range ta.Agents {
		if i != old {
			live = append(live, i)
		}
	}
	phases := 0
	testutil.Eventually(t, 30*time.Second, 0, "a phase with every leader-bound request on the new leader", func() error {
		phases++
		var stable bool
		deltas, leader, stable = e.phase(ta, live, 2)
		if stable && clean(deltas, leader, 2) {
			t.Logf("re-routed to %s within %d phase(s)", nodeID(ta.Agents[leader]), phases)
			return nil
		}
		t.Logf("phase %d after the failover: %v (leader %d)", phases, deltas, leader)
		return fmt.Errorf("%v (leader %d)", deltas, leader)
	})
	if node, _ := c.Leader(); node != nodeID(ta.Agents[leader]) || node == nodeID(ta.Agents[old]) {
		t.Fatalf("client routes to %q after the failover, leader is %s", node, nodeID(ta.Agents[leader]))
	}
	// And it stays there.
	if deltas, l, stable := e.phase(ta, live, 3); stable && !clean(deltas, l, 3) {
		t.Fatalf("after re-routing: %v (leader %d)", deltas, l)
	}
}

// With Route "any" the worker keeps talking to its current agent, which
// forwards: the followers see the requests.
func TestWorkerRouteAnyUsesTheCurrentAgent(t *testing.T) {
	ta := startAgents(t)
	c, err := rpc.NewClient(ta.Eps, rpc.ClientOptions{Route: rpc.RouteAny})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &env{t: t, eps: ta.Eps, c: c}
	w := e.worker(Options{Route: rpc.RouteAny})
	w.Register("t", func(context.Context, *Task) (any, error) { return "ok", nil })
	e.start(w)
	for try := 0; ; try++ {
		deltas, leader, stable := e.phase(ta, []int{0, 1, 2}, 2)
		if !stable && try < 3 {
			continue
		}
		// Both clients talk to n1 (the first endpoint), leader or not.
		if d := deltas[0]; d[rpc.MethodRunSubmit] != 2 || d[rpc.MethodTaskClaim] == 0 || d[rpc.MethodTaskComplete] < 3 {
			t.Fatalf("n1 received %v (leader %d): %s", d, leader, fmt.Sprint(deltas))
		}
		if node, ep := c.Leader(); node != "" || ep != "" || !strings.HasSuffix(c.Endpoint(), "n1.sock") {
			t.Fatalf("Leader() %q %q, Endpoint() %s", node, ep, c.Endpoint())
		}
		return
	}
}
