package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, healthCommand) }

var healthCommand = &cli.Command{
	Name:  "health",
	Usage: "ask every agent of --addr for its view of the cluster",
	Description: "Calls cluster.status on each endpoint separately, in parallel. The verdict and\n" +
		"exit code:\n" +
		"  healthy    0  every agent of --addr answers and they agree on one leader\n" +
		"  degraded   5  the reachable agents agree on a leader (a quorum holds) but some\n" +
		"                agents of --addr do not answer: one more loss may stop writes\n" +
		"  unhealthy  1  no leader (no quorum, or an election that does not end), the\n" +
		"                agents disagree, or none is reachable",
	Action: healthAction,
}

// nodeHealth is one endpoint's answer.
type nodeHealth struct {
	Endpoint     string `json:"endpoint"`
	Reachable    bool   `json:"reachable"`
	Error        string `json:"error,omitempty"`
	Node         string `json:"node,omitempty"`
	State        string `json:"state,omitempty"`
	Leader       string `json:"leader,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	CommitIndex  uint64 `json:"commit_index,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	Peers        int    `json:"peers,omitempty"`
	Version      string `json:"version,omitempty"`
}

type healthReport struct {
	Healthy bool `json:"healthy"`
	// Verdict is healthy, degraded or unhealthy (the exit code follows it).
	Verdict string       `json:"verdict"`
	Leader  string       `json:"leader,omitempty"`
	Problem string       `json:"problem,omitempty"`
	Hint    string       `json:"hint,omitempty"`
	Nodes   []nodeHealth `json:"nodes"`
}

func probe(ctx context.Context, ep string, timeout time.Duration, auth rpc.ClientOptions) nodeHealth {
	h := nodeHealth{Endpoint: ep}
	c, err := rpc.NewClient([]string{ep}, rpc.ClientOptions{MaxAttempts: 1, DialTimeout: min(timeout, 2*time.Second), Logger: discardLogger,
		Token: auth.Token, TLS: auth.TLS})
	if err != nil {
		h.Error = err.Error()
		return h
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Reachable = true
	h.Node, h.State, h.Leader, h.Term = st.NodeID, strings.ToLower(st.State), st.LeaderID, st.Term
	h.CommitIndex, h.AppliedIndex, h.Peers, h.Version = st.CommitIndex, st.AppliedIndex, len(st.Peers), st.Version
	return h
}

func checkHealth(cCtx *cli.Context, auth rpc.ClientOptions) healthReport {
	eps := endpoints(cCtx)
	rep := healthReport{Nodes: make([]nodeHealth, len(eps))}
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { rep.Nodes[i] = probe(cCtx.Context, ep, callTimeout(cCtx), auth) })
	}
	wg.Wait()
	rep.Leader, rep.Problem, rep.Hint = diagnose(rep.Nodes)
	rep.Healthy = rep.Problem == ""
	rep.Verdict = verdictUnhealthy
	if rep.Healthy {
		rep.Verdict = verdictHealthy
		if up := reachableCount(rep.Nodes); up < len(rep.Nodes) {
			rep.Verdict = verdictDegraded
			rep.Problem = fmt.Sprintf("%d of %d agents reachable: quorum holds with leader %s, but %s",
				up, len(rep.Nodes), rep.Leader, downText(rep.Nodes))
			rep.Hint = "start the agents that are down (same flags, same data dir): one more loss stops writes"
		}
	}
	return rep
}

func healthAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	if len(endpoints(cCtx)) == 0 {
		return usageErr(cCtx, "--addr is empty")
	}
	var auth rpc.ClientOptions
	var err error
	if auth.Token, auth.TLS, err = clientAuth(cCtx); err != nil {
		return err
	}
	rep := checkHealth(cCtx, auth)
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		if err := printJSON(w, rep); err != nil {
			return err
		}
	} else {
		tw := newTable(w)
		row(tw, "ENDPOINT", "NODE", "STATE", "LEADER", "TERM", "APPLIED", "REACHABLE")
		for _, n := range rep.Nodes {
			if !n.Reachable {
				row(tw, n.Endpoint, "-", "-", "-", "-", "-", "✗ "+oneLine(n.Error, 80))
				continue
			}
			row(tw, n.Endpoint, n.Node, n.State, dash(n.Leader), n.Term, n.AppliedIndex, "✓")
		}
		tw.Flush()
		switch rep.Verdict {
		case verdictHealthy:
			fmt.Fprintf(w, "healthy: leader %s, %d/%d agents reachable\n", rep.Leader, reachableCount(rep.Nodes), len(rep.Nodes))
		case verdictDegraded:
			fmt.Fprintf(w, "degraded: %s\nhint: %s\n", rep.Problem, rep.Hint)
		}
	}
	if rep.Verdict == verdictDegraded {
		return exitWith(exitDegraded)
	}
	if !rep.Healthy {
		if !jsonOut(cCtx) {
			return failf(rep.Hint, "unhealthy: %s", rep.Problem)
		}
		return exitWith(exitError)
	}
	return nil
}

// Verdicts of flowd health.
const (
	verdictHealthy   = "healthy"
	verdictDegraded  = "degraded"
	verdictUnhealthy = "unhealthy"
)

func reachableCount(nodes []nodeHealth) int {
	up := 0
	for _, n := range nodes {
		if n.Reachable {
			up++
		}
	}
	return up
}

// downText names the unreachable endpoints.
func downText(nodes []nodeHealth) string {
	var down []string
	for _, n := range nodes {
		if !n.Reachable {
			down = append(down, n.Endpoint)
		}
	}
	return strings.Join(down, ", ") + " " + pl(len(down), "does", "do") + " not answer"
}

const hintStartAgents = "start the missing agents (`flowd dev` for a local cluster), or check --addr / FLOWD_ADDR"

// hintRecover follows a quorum-loss hint.
const hintRecover = "; if a majority is gone for good, see docs/operations.md, \"Outage recovery\" (`flowd operator raft recover`)"

// diagnose reads the probes: the leader they agree on, or the problem and
// what to do about it. A reachable node without a leader while the others
// follow one is most often a node started to join that no member has added
// yet (it stays a candidate: it cannot win alone, and pre-vote keeps it
// quiet), so the hint is add-peer, not starting agents that already run.
func diagnose(nodes []nodeHealth) (leader, problem, hint string) {
	leaders := map[string][]string{}
	var lost []string // reachable, no leader
	reachable := 0
	for _, n := range nodes {
		if !n.Reachable {
			continue
		}
		reachable++
		if n.Leader == "" {
			lost = append(lost, n.Node)
			continue
		}
		leaders[n.Leader] = append(leaders[n.Leader], n.Node)
	}
	sort.Strings(lost)
	addPeer := func(ids []string) string {
		return fmt.Sprintf("if %s is new, add it through a member: `flowd operator raft add-peer %s RAFT-ADDR`", strings.Join(ids, ","), ids[0])
	}
	switch {
	case reachable == 0:
		return "", "no agent is reachable", hintStartAgents
	case len(leaders) > 1:
		var views []string
		for l, ns := range leaders {
			views = append(views, fmt.Sprintf("%s say %s", strings.Join(ns, ","), l))
		}
		sort.Strings(views)
		return "", "the agents disagree on the leader: " + strings.Join(views, "; "),
			"wait for the election to settle and retry; if it persists, compare `flowd operator raft list-peers` on each agent"
	case len(leaders) == 1 && len(lost) > 0:
		for l := range leaders {
			leader = l
		}
		return "", fmt.Sprintf("%s %s no leader while the others follow %s", strings.Join(lost, ","), pl(len(lost), "has", "have"), leader),
			addPeer(lost) + "; a member that lost touch: check its log and network"
	case len(leaders) == 0:
		if reachable < len(nodes)/2+1 {
			return "", fmt.Sprintf("no leader: %d of %d agents reachable, no quorum: writes stop until a majority is back (reads answer from one agent, possibly stale)", reachable, len(nodes)), hintStartAgents + hintRecover
		}
		if reachable < len(nodes) {
			return "", "no leader: the cluster may have lost its quorum", hintStartAgents + hintRecover
		}
		if len(lost) == 1 {
			return "", "no leader: the cluster may have lost its quorum",
				addPeer(lost) + "; otherwise start the missing agents, or put every member in --addr"
		}
		return "", "no leader: the cluster may have lost its quorum",
			"see which members are configured with `flowd operator raft list-peers` and start the ones not running; check the agents' logs"
	}
	for l := range leaders {
		leader = l
	}
	if reachable < len(nodes)/2+1 && !slices.ContainsFunc(nodes, func(n nodeHealth) bool { return n.Reachable && n.Node == leader }) {
		// The agents that answer still name a leader that does not (it
		// died a moment ago): with a majority of the listed agents down
		// there is no quorum, whatever that stale claim says.
		return "", fmt.Sprintf("no leader: %d of %d agents reachable, no quorum: they still name %s as leader, which does not answer; writes stop until a majority is back (reads answer from one agent, possibly stale)",
			reachable, len(nodes), leader), hintStartAgents + hintRecover
	}
	return leader, "", ""
}

func pl(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
