package chaos

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/rpc"
)

// Agent settings of every run (through the build's hooks, see build.go).
const (
	snapThreshold = 1024
	trailingLogs  = 512
	snapInterval  = 3 * time.Second
	clockOffset   = 3 * time.Second
)

// Config is one chaos run.
type Config struct {
	Bin, BaseDir string
	// BinNext is the release a RollingUpgrade cycle upgrades to
	// (BuildNextAgent).
	BinNext                       string
	Cycles                        []string // fault kinds, in order
	Hold                          time.Duration
	Gap                           time.Duration // fault-free load between cycles
	Rate                          float64       // submits/s
	Submitters, Workers, Stallers int
	QSShare                       float64
	Log                           *slog.Logger
	AgentFlags                    []string // extra flags of every agent (e.g. --log-level debug)
}

// Summary is what the checkers found. The Safety* fields gate every run;
// the Liveness* fields are counted and reported (see doc.go).
type Summary struct {
	Cycles, Tasks, Acked int
	// Safety.
	Lost, Duplicates, DoubleSuccess, StaleAccepted, DigestMismatch, Unrecovered int
	// Liveness (known not to hold yet, issue 10).
	OrphanLeases, FaultAttempts, FailedQ1, FailedQS, NotFinal int
	CreatedFalse, SlowSubmits                                 int
	// Counts.
	StaleWrites, Completes, Fails, SubmitErrors, ClaimErrors, LeasesLost, StallTimeouts int
	DigestIndex                                                                         uint64
	Failover                                                                            map[string][]time.Duration
	Notes, Problems                                                                     []string
	MaxSubmit                                                                           time.Duration
}

// SafetyViolations is the sum of the gating checkers.
func (s *Summary) SafetyViolations() int {
	return s.Lost + s.Duplicates + s.DoubleSuccess + s.StaleAccepted + s.DigestMismatch + s.Unrecovered
}

// LivenessViolations is the sum of the reported (non-gating) checkers.
func (s *Summary) LivenessViolations() int {
	return s.OrphanLeases + s.FaultAttempts + s.FailedQ1 + s.FailedQS + s.NotFinal + s.CreatedFalse + s.SlowSubmits
}

// Line is the one summary line.
func (s *Summary) Line() string {
	var fo []string
	kinds := make([]string, 0, len(s.Failover))
	for k := range s.Failover {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		p, m := p50max(s.Failover[k])
		fo = append(fo, fmt.Sprintf("%s=%s/%s(n=%d)", k, ms(p), ms(m), len(s.Failover[k])))
	}
	return fmt.Sprintf("chaos: cycles=%d tasks=%d acked=%d | safety: lost=%d dup_client_id=%d double_success=%d stale_accepted=%d/%d digest_mismatch=%d unrecovered=%d"+
		" | liveness: orphan_leases=%d fault_attempts=%d failed_max1=%d failed_retrying=%d not_final=%d created_false=%d slow_forward_10s=%d"+
		" | failover p50/max: %s",
		s.Cycles, s.Tasks, s.Acked, s.Lost, s.Duplicates, s.DoubleSuccess, s.StaleAccepted, s.StaleWrites, s.DigestMismatch, s.Unrecovered,
		s.OrphanLeases, s.FaultAttempts, s.FailedQ1, s.FailedQS, s.NotFinal, s.CreatedFalse, s.SlowSubmits, strings.Join(fo, " "))
}

func ms(d time.Duration) string {
	if d < 0 {
		return "timeout"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// Run runs the cluster, the workload and the nemesis, heals, and checks.
// The cluster is torn down before it returns.
func Run(cfg Config) (*Summary, error) {
	log := cfg.Log
	spare := 0
	if contains(cfg.Cycles, Membership) {
		spare = 1
	}
	env := []string{fmt.Sprintf("FLOWD_CHAOS_SNAPSHOT_THRESHOLD=%d", snapThreshold),
		fmt.Sprintf("FLOWD_CHAOS_TRAILING_LOGS=%d", trailingLogs), "FLOWD_CHAOS_SNAPSHOT_INTERVAL=" + snapInterval.String()}
	c, err := NewCluster(log, ClusterOptions{Bin: cfg.Bin, BaseDir: cfg.BaseDir, N: 3, Spare: spare, Env: env, Flags: cfg.AgentFlags})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if c.WaitLeader(30*time.Second) == nil {
		var tails []string
		for _, a := range c.Members() {
			tails = append(tails, "--- "+a.ID+"\n"+a.Tail(20))
		}
		return nil, fmt.Errorf("no leader at start:\n%s", strings.Join(tails, "\n"))
	}
	rec := NewRecord()
	w := StartWorkload(log, c, rec, WorkloadOptions{Submitters: cfg.Submitters, Workers: cfg.Workers, Stallers: cfg.Stallers,
		Rate: cfg.Rate, QSShare: cfg.QSShare})
	n := NewNemesis(log, c, cfg.Hold)
	n.Next = cfg.BinNext
	waitFor(30*time.Second, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.Acked) >= 20 })
	for i, kind := range cfg.Cycles {
		log.Info("chaos: cycle", "n", i+1, "of", len(cfg.Cycles), "kind", kind)
		n.Run(kind)
		time.Sleep(cfg.Gap) // fault-free load between faults (part of the schedule)
	}
	// Heal everything, whatever a cycle left.
	_ = c.Net.Heal()
	c.Faults.Clear()
	for _, a := range c.Members() {
		c.Cont(a)
		if !a.Running() {
			_ = c.Start(a)
		}
	}
	s := &Summary{Failover: n.Failover, Notes: n.Notes, Cycles: n.Cycles}
	if bad := c.WaitHealthy(60*time.Second, 200); len(bad) > 0 {
		for _, a := range bad {
			n.Unrecovered = append(n.Unrecovered, "final: "+a.ID)
		}
	}
	w.StopSubmitters()
	log.Info("chaos: submitters stopped; waiting until every run is final")
	leaderOf := func() *Agent { return c.WaitLeader(20 * time.Second) }
	final := waitFor(120*time.Second, func() bool {
		l := leaderOf()
		if l == nil {
			return false
		}
		var lr rpc.ListResult
		if call(l, 5*time.Second, rpc.MethodRunList, rpc.ListParams{Limit: 1}, &lr) != nil {
			return false
		}
		open := 0
		for st, k := range lr.Counts {
			if !terminal(st) {
				open += k
			}
		}
		return open == 0
	})
	if !final {
		log.Warn("chaos: some runs are not final after 120 s")
	}
	w.StopWorkers()
	s.Unrecovered = len(n.Unrecovered)
	s.Problems = append(s.Problems, n.Unrecovered...)
	check(log, c, rec, s)
	return s, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func terminal(state string) bool {
	switch state {
	case "succeeded", "failed", "cancelled", "reverted":
		return true
	}
	return false
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond) // polling external processes
	}
}

// listAll lists every run one agent holds (its local state).
func listAll(a *Agent) (map[string]rpc.Run, error) {
	out := map[string]rpc.Run{}
	cursor := ""
	for {
		var lr rpc.ListResult
		if err := call(a, 30*time.Second, rpc.MethodRunList, rpc.ListParams{Limit: 1000, Cursor: cursor}, &lr); err != nil {
			return nil, err
		}
		for _, r := range lr.Runs {
			out[r.ID] = r
		}
		if lr.NextCursor == "" {
			return out, nil
		}
		cursor = lr.NextCursor
	}
}

// check runs the checkers after healing, with the workload stopped.
func check(log *slog.Logger, c *Cluster, rec *Record, s *Summary) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s.Acked = len(rec.Acked)
	s.StaleAccepted, s.StaleWrites = len(rec.StaleAccepted), int(rec.StaleWrites.Load())
	s.Problems = append(s.Problems, rec.StaleAccepted...)
	s.CreatedFalse, s.SlowSubmits = int(rec.CreatedFalse.Load()), int(rec.SlowSubmits.Load())
	s.Completes, s.Fails, s.SubmitErrors = int(rec.Completes.Load()), int(rec.Fails.Load()), int(rec.SubmitErrors.Load())
	s.ClaimErrors, s.LeasesLost, s.StallTimeouts = int(rec.ClaimErrors.Load()), int(rec.LeasesLost.Load()), int(rec.StallTimeouts.Load())
	s.MaxSubmit = time.Duration(rec.MaxSubmit.Load())
	members := c.Members()

	// Equal digests at one applied index on every member.
	settled := waitFor(60*time.Second, func() bool {
		var idx uint64
		digests := map[string][]string{}
		for i, a := range members {
			var d rpc.DigestResult
			if call(a, 10*time.Second, rpc.MethodClusterDigest, struct{}{}, &d) != nil {
				return false
			}
			if i > 0 && d.AppliedIndex != idx {
				return false
			}
			idx = d.AppliedIndex
			digests[d.Digest] = append(digests[d.Digest], a.ID)
		}
		s.DigestIndex = idx
		if len(digests) > 1 {
			s.DigestMismatch = 1
			s.Problems = append(s.Problems, fmt.Sprintf("digests differ at index %d: %v", idx, digests))
		}
		return true
	})
	if !settled {
		s.DigestMismatch = 1
		s.Problems = append(s.Problems, "digest: the members never reported one applied index within 60 s")
	}

	// Every acknowledged run on every member, final; no duplicate run per
	// client id.
	var leaderRuns map[string]rpc.Run
	for _, a := range members {
		runs, err := listAll(a)
		if err != nil {
			s.Unrecovered++
			s.Problems = append(s.Problems, fmt.Sprintf("run.list on %s: %v", a.ID, err))
			continue
		}
		if leaderRuns == nil {
			leaderRuns = runs
		}
		lost := 0
		for id := range rec.Acked {
			if _, ok := runs[id]; !ok {
				lost++
				if lost <= 5 {
					s.Problems = append(s.Problems, fmt.Sprintf("acknowledged run %s missing on %s", id, a.ID))
				}
			}
		}
		s.Lost += lost
		perCID := map[string]int{}
		for id, r := range runs {
			cid := r.Labels["cid"]
			if cid == "" {
				cid = id
			}
			perCID[cid]++
		}
		for cid, k := range perCID {
			if k > 1 {
				s.Duplicates += k - 1
				s.Problems = append(s.Problems, fmt.Sprintf("%d runs for client id %s on %s", k, cid, a.ID))
			}
		}
	}
	s.Tasks = len(leaderRuns)
	for id := range rec.Acked {
		if r, ok := leaderRuns[id]; ok && !terminal(string(r.State)) {
			s.NotFinal++
		}
	}

	// Tasks: successes, orphan leases, attempts spent by faults.
	for task, toks := range rec.Successes {
		if len(toks) > 1 {
			s.DoubleSuccess++
			s.Problems = append(s.Problems, fmt.Sprintf("task %s: %d accepted successes (tokens %v)", task, len(toks), toks))
		}
	}
	type res struct {
		id, queue string
		t         *rpc.Task
	}
	ids := make(chan [2]string)
	out := make(chan res)
	var wg sync.WaitGroup
	reader := members[0]
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range ids {
				var t rpc.Task
				var got *rpc.Task
				for try := 0; try < 3; try++ {
					if call(reader, 10*time.Second, rpc.MethodTaskGet, rpc.TaskIDParams{ID: p[0] + "/t"}, &t) == nil {
						got = &t
						break
					}
				}
				out <- res{p[0], p[1], got}
			}
		}()
	}
	go func() {
		for id, q := range rec.Acked {
			ids <- [2]string{id, q}
		}
		close(ids)
		wg.Wait()
		close(out)
	}()
	examples := map[string]int{}
	for r := range out {
		if r.t == nil {
			continue // counted as lost above if it is missing
		}
		t := r.t
		succ := 0
		for _, at := range t.Attempts {
			kind, held := rec.Received[t.ID][at.FencingToken]
			if at.Outcome == "succeeded" {
				succ++
			}
			if !held {
				s.OrphanLeases++
				if examples["orphan"]++; examples["orphan"] <= 10 {
					s.Notes = append(s.Notes, fmt.Sprintf("orphan lease: %s attempt %d token %d worker %s outcome %s claimed %s; that worker's failed claims near it: %s",
						t.ID, at.N, at.FencingToken, at.Worker, at.Outcome, at.ClaimedAt.Format(time.RFC3339Nano),
						failuresNear(rec.ClaimFailures[at.Worker], at.ClaimedAt)))
				}
			}
			if at.Outcome == "lease_expired" && kind != "staller" {
				s.FaultAttempts++
				if examples["fault"]++; examples["fault"] <= 3 {
					s.Notes = append(s.Notes, fmt.Sprintf("attempt spent by a fault: %s attempt %d token %d worker %s held=%v claimed %s ended %s",
						t.ID, at.N, at.FencingToken, at.Worker, held, at.ClaimedAt.Format(time.RFC3339Nano), at.EndedAt.Format(time.RFC3339Nano)))
				}
			}
		}
		if succ > 1 {
			s.DoubleSuccess++
			s.Problems = append(s.Problems, fmt.Sprintf("task %s has %d succeeded attempts", t.ID, succ))
		}
		if t.State == "failed" {
			if r.queue == q1 {
				s.FailedQ1++
			} else {
				s.FailedQS++
			}
		}
	}
	log.Info("chaos: checked", "members", len(members), "runs", s.Tasks, "acked", s.Acked)
}

// failuresNear lists a worker's failed claims that ended after t-1s and
// started before t+10s (the claim whose answer was lost, and the re-sends
// that did not reach a leader in time), or "none".
func failuresNear(fs []ClaimFailure, t time.Time) string {
	var out []string
	for _, f := range fs {
		if f.Start.Before(t.Add(10*time.Second)) && f.Start.Add(f.Took).After(t.Add(-time.Second)) {
			out = append(out, fmt.Sprintf("[%s +%s: %s]", f.Start.Format("15:04:05.000"), f.Took.Round(time.Millisecond), f.Err))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}
