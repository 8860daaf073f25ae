package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// The queue workload of `flowd bench`: producers submit one-task runs, one
// run.submit per job, while workers claim and complete them.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (sysconf(_SC_CLK_TCK), 100 on Linux).
const clockTicks = 100

type queueReport struct {
	Mode           string    `json:"mode"`   // queue
	Pacing         string    `json:"pacing"` // burst or paced
	Jobs           int       `json:"jobs"`
	Acked          int       `json:"acked"`           // completions accepted
	Rejected       int       `json:"rejected"`        // completions refused (lost leases)
	CompleteErrors int       `json:"complete_errors"` // completions that failed outright
	Producers      int       `json:"producers"`
	Workers        int       `json:"workers"`
	ClaimMax       int       `json:"claim_max"`
	PayloadBytes   int       `json:"payload_bytes"`
	Seconds        float64   `json:"seconds"` // first submit to last ack
	JobsPerSecond  float64   `json:"jobs_per_second"`
	Paced          *pacedRep `json:"paced,omitempty"`
	// LatencyMS is submit -> completion ack: from the submit call (burst)
	// or from the scheduled submit time (paced).
	LatencyMS    latencyRep `json:"latency_ms"`
	SubmitCallMS latencyRep `json:"submit_call_ms"` // run.submit round trips
	AvgClaimSize float64    `json:"avg_claim_size"`
	// RaftEntries is the leader's commit_index delta over the run.
	RaftEntries   uint64  `json:"raft_entries"`
	EntriesPerJob float64 `json:"raft_entries_per_job"`
	Leader        string  `json:"leader,omitempty"`
	AgentPIDs     []int   `json:"agent_pids,omitempty"`
	// AgentCPUSeconds is utime+stime of the agents over the run; null when
	// unknown (CPUNote says why).
	AgentCPUSeconds  *float64 `json:"agent_cpu_seconds"`
	AgentCPUMSPerJob *float64 `json:"agent_cpu_ms_per_job"`
	CPUNote          string   `json:"cpu_note,omitempty"`
	Succeeded        int      `json:"succeeded"` // runs verified succeeded after the run
}

type pacedRep struct {
	TargetRate     float64 `json:"target_rate"`
	KeptUp         bool    `json:"kept_up"`           // jobs_per_second >= 95% of target_rate
	MaxSubmitLagMS float64 `json:"max_submit_lag_ms"` // latest start of a submit after its slot
}

type latencyRep struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// errBenchDone cancels the run when every job is settled.
var errBenchDone = errors.New("all jobs settled")

type queueJob struct {
	start     time.Time // latency origin: submit call (burst) or slot (paced)
	call      time.Time // run.submit sent
	submitted time.Time // run.submit answered
	acked     time.Time // task.complete accepted
}

func runQueueBench(c *cli.Context, eps []string, spawnedPIDs []int) error {
	n, producers, workers, claimMax := c.Int("jobs"), c.Int("producers"), c.Int("workers"), c.Int("claim-max")
	claimNext := c.Bool("claim-next")
	rate, payloadSize, stall := c.Float64("rate"), c.Int("payload"), c.Duration("stall-timeout")
	switch {
	case n <= 0 || producers <= 0 || workers <= 0 || claimMax <= 0:
		return usageErr(c, "--jobs, --producers, --workers and --claim-max must be positive")
	case rate < 0:
		return usageErr(c, "--rate must be >= 0 (0 = burst)")
	case payloadSize < 0:
		return usageErr(c, "--payload must be >= 0")
	case stall <= 0:
		return usageErr(c, "--stall-timeout must be positive")
	}
	ctx := c.Context
	callTO := callTimeout(c)
	opts := rpc.ClientOptions{Logger: discardLogger, DialTimeout: min(2*time.Second, callTO)}
	var err error
	if opts.Token, opts.TLS, err = clientAuth(c); err != nil {
		return err
	}
	queue := "bench-" + uuid.NewString()[:8] // isolates this run from other work
	rep := queueReport{Mode: "queue", Pacing: "burst", Jobs: n, Producers: producers, Workers: workers,
		ClaimMax: claimMax, PayloadBytes: payloadSize}
	if rate > 0 {
		rep.Pacing = "paced"
		rep.Paced = &pacedRep{TargetRate: rate}
	}

	before := clusterStatuses(ctx, eps, opts)
	commit0, _, ok := leaderCommit(before)
	if !ok {
		return errors.New("no agent answered cluster.status; is the cluster up (flowd health)?")
	}
	pids, cpuNote := agentPIDs(spawnedPIDs, before)
	cpu0, cpuErr := cpuTicks(pids)

	jobs := make([]queueJob, n)
	ids := make([]string, n)
	var index sync.Map // run id -> job
	var submitted, acked, rejected, failed, total, claims, claimed atomic.Int64
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	settled := func(counter *atomic.Int64) {
		counter.Add(1) // before total: the last one sees every counter final
		if total.Add(1) == int64(n) {
			cancel(errBenchDone)
		}
	}

	mode := "as fast as they go"
	if rate > 0 {
		mode = fmt.Sprintf("at %g jobs/s", rate)
	}
	fmt.Fprintf(c.App.ErrWriter, "queue bench: %d one-task runs from %d producers (%s), %d workers claiming up to %d...\n",
		n, producers, mode, workers, claimMax)

	// Workers first, so the first jobs find them polling.
	var wwg sync.WaitGroup
	for w := 0; w < workers; w++ {
		cl, err := rpc.NewClient(rotate(eps, producers+w), opts)
		if err != nil {
			return err
		}
		defer cl.Close()
		wwg.Add(1)
		go func(w int) {
			defer wwg.Done()
			id := fmt.Sprintf("%s-w%d", queue, w)
			for rctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(rctx, callTO+time.Second)
				got, err := cl.Claim(cctx, rpc.ClaimParams{WorkerID: id, Queues: []string{queue}, Max: claimMax, WaitMS: 1000})
				ccancel()
				if err != nil {
					benchPause(rctx, 50*time.Millisecond) // no hot loop while an agent is away
					continue
				}
				if len(got) == 0 {
					continue
				}
				claims.Add(1)
				claimed.Add(int64(len(got)))
				complete := func(t rpc.Claimed) *rpc.Claimed {
					dctx, dcancel := context.WithTimeout(ctx, callTO)
					defer dcancel()
					p := rpc.CompleteParams{TaskID: t.TaskID, FencingToken: t.FencingToken}
					var ack *rpc.AckResult
					var err error
					if claimNext && rctx.Err() == nil {
						p.Claim = &rpc.ClaimParams{WorkerID: id, Queues: []string{queue}, Max: 1}
						if ack, err = cl.CompleteAndClaim(dctx, p); err != nil {
							p.Claim = nil // outcome unknown: report it alone (repeat-safe)
						}
					}
					if p.Claim == nil {
						ack, err = cl.Complete(dctx, p)
					}
					now := time.Now()
					switch {
					case err != nil:
						settled(&failed)
					case !ack.Accepted:
						settled(&rejected)
					default:
						if i, ok := index.Load(t.RunID); ok {
							jobs[i.(int)].acked = now
						}
						settled(&acked)
					}
					if err == nil && len(ack.Tasks) > 0 {
						claims.Add(1) // a claim that rode on the completion
						claimed.Add(int64(len(ack.Tasks)))
						return &ack.Tasks[0]
					}
					return nil
				}
				if len(got) == 1 {
					for next := &got[0]; next != nil; {
						next = complete(*next)
					}
					continue
				}
				var inner sync.WaitGroup
				for _, t := range got {
					inner.Add(1)
					go func(t rpc.Claimed) {
						defer inner.Done()
						for next := &t; next != nil; {
							next = complete(*next)
						}
					}(t)
				}
				inner.Wait()
			}
		}(w)
	}

	// Producers.
	var next atomic.Int64
	var pwg sync.WaitGroup
	t0 := time.Now()
	for p := 0; p < producers; p++ {
		cl, err := rpc.NewClient(rotate(eps, p), opts)
		if err != nil {
			cancel(err)
			break
		}
		defer cl.Close()
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for rctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				var slot time.Time
				if rate > 0 { // open loop: job i's slot is fixed, whatever came before
					slot = t0.Add(time.Duration(float64(i) * float64(time.Second) / rate))
					if !pauseUntil(rctx, slot) {
						return
					}
				}
				id := uuid.Must(uuid.NewV7()).String()
				ids[i] = id
				j := &jobs[i]
				j.call = time.Now()
				j.start = j.call
				if rate > 0 {
					j.start = slot
				}
				index.Store(id, i)
				// ctx, not rctx: the last jobs may complete before their
				// submit is answered.
				sctx, scancel := context.WithTimeout(ctx, callTO)
				_, err := cl.Submit(sctx, rpc.SubmitParams{Workflow: queueWorkflow(queue, i, payloadSize), ID: id})
				scancel()
				if err != nil {
					cancel(fmt.Errorf("submit job %d: %w", i, err))
					return
				}
				j.submitted = time.Now()
				submitted.Add(1)
			}
		}()
	}

	// Watchdog: give up when jobs are outstanding and none settles.
	go func() {
		tick := time.NewTicker(min(time.Second, stall/4))
		defer tick.Stop()
		last, since := int64(-1), time.Now()
		for {
			select {
			case <-rctx.Done():
				return
			case now := <-tick.C:
				s := total.Load()
				if s != last || submitted.Load() == s {
					last, since = s, now
					continue
				}
				if now.Sub(since) >= stall {
					cancel(fmt.Errorf("stalled: no job completed for %s (%d of %d acked, %d submitted)",
						stall, acked.Load(), n, submitted.Load()))
					return
				}
			}
		}
	}()

	pwg.Wait()
	wwg.Wait()
	if cause := context.Cause(rctx); !errors.Is(cause, errBenchDone) {
		if cause == nil || errors.Is(cause, context.Canceled) {
			cause = errors.New("interrupted")
		}
		return fmt.Errorf("queue bench: %w", cause)
	}
	after := clusterStatuses(ctx, eps, opts)
	cpu1, cpuErr1 := cpuTicks(pids)
	if cpuErr == nil {
		cpuErr = cpuErr1
	}

	// Numbers.
	rep.Acked, rep.Rejected, rep.CompleteErrors = int(acked.Load()), int(rejected.Load()), int(failed.Load())
	var first, last time.Time
	var lat, call []time.Duration
	var maxLag time.Duration
	for i, j := range jobs {
		if first.IsZero() || j.call.Before(first) {
			first = j.call
		}
		if !j.submitted.IsZero() {
			call = append(call, j.submitted.Sub(j.call))
		}
		if rate > 0 {
			slot := t0.Add(time.Duration(float64(i) * float64(time.Second) / rate))
			maxLag = max(maxLag, j.call.Sub(slot))
		}
		if j.acked.IsZero() {
			continue
		}
		last = later(last, j.acked)
		lat = append(lat, j.acked.Sub(j.start))
	}
	if !last.IsZero() {
		rep.Seconds = last.Sub(first).Seconds()
		rep.JobsPerSecond = float64(rep.Acked) / rep.Seconds
	}
	rep.LatencyMS, rep.SubmitCallMS = latencyOf(lat), latencyOf(call)
	if c := claims.Load(); c > 0 {
		rep.AvgClaimSize = float64(claimed.Load()) / float64(c)
	}
	if rep.Paced != nil {
		rep.Paced.KeptUp = rep.JobsPerSecond >= 0.95*rate
		rep.Paced.MaxSubmitLagMS = ms(maxLag)
	}
	if commit1, leader, ok := leaderCommit(after); ok && commit1 >= commit0 {
		rep.RaftEntries, rep.Leader = commit1-commit0, leader
		rep.EntriesPerJob = float64(rep.RaftEntries) / float64(n)
	}
	rep.AgentPIDs = pids
	switch {
	case len(pids) == 0:
		rep.CPUNote = cpuNote
	case cpuErr != nil:
		rep.CPUNote = cpuErr.Error()
	default:
		secs := float64(cpu1-cpu0) / clockTicks
		perJob := secs * 1000 / float64(n)
		rep.AgentCPUSeconds, rep.AgentCPUMSPerJob = &secs, &perJob
		rep.CPUNote = cpuNote // caveats: partial, or in process
	}

	// Every run must have succeeded.
	verr := verifyRuns(ctx, eps, opts, callTO, ids, &rep.Succeeded)
	if err := printQueueReport(c, rep); err != nil {
		return err
	}
	return verr
}

// queueWorkflow is job i's one-task run, with a JSON input of size bytes
// (or the smallest that names the job, when size is smaller).
func queueWorkflow(queue string, i, size int) json.RawMessage {
	head, tail := `{"job":`+strconv.Itoa(i)+`,"pad":"`, `"}`
	in := head + strings.Repeat("x", max(0, size-len(head)-len(tail))) + tail
	return json.RawMessage(`{"name":"bench-queue","tasks":[{"key":"job","type":"bench","queue":"` + queue + `","input":` + in + `}]}`)
}

// epStatus is one endpoint's cluster.status (nil when it did not answer).
type epStatus struct {
	ep string
	st *rpc.ClusterStatus
}

// clusterStatuses asks every endpoint for cluster.status.
func clusterStatuses(ctx context.Context, eps []string, opts rpc.ClientOptions) []epStatus {
	out := make([]epStatus, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		out[i].ep = ep
		go func() {
			defer wg.Done()
			o := opts
			o.MaxAttempts = 2
			cl, err := rpc.NewClient([]string{ep}, o)
			if err != nil {
				return
			}
			defer cl.Close()
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if st, err := cl.Status(sctx); err == nil {
				out[i].st = st
			}
		}()
	}
	wg.Wait()
	return out
}

// leaderCommit is the leader's commit index, or the highest one seen when
// the leader is not among the endpoints.
func leaderCommit(sts []epStatus) (idx uint64, leader string, ok bool) {
	for _, s := range sts {
		if s.st != nil && s.st.LeaderID != "" && s.st.NodeID == s.st.LeaderID {
			return s.st.CommitIndex, s.st.NodeID, true
		}
	}
	for _, s := range sts {
		if s.st != nil {
			idx, ok = max(idx, s.st.CommitIndex), true
		}
	}
	return idx, "", ok
}

// agentPIDs are the agents' pids: the spawned ones, or those cluster.status
// reports through local endpoints (a remote agent's pid means nothing here).
func agentPIDs(spawned []int, sts []epStatus) ([]int, string) {
	if len(spawned) > 0 {
		return spawned, ""
	}
	var pids []int
	remote, peers := false, 0
	for _, s := range sts {
		if s.st != nil {
			peers = max(peers, len(s.st.Peers))
		}
		if s.st == nil || s.st.PID <= 0 {
			continue
		}
		if !localEndpoint(s.ep) {
			remote = true
			continue
		}
		if !slices.Contains(pids, s.st.PID) {
			pids = append(pids, s.st.PID)
		}
	}
	sort.Ints(pids)
	switch {
	case slices.Contains(pids, os.Getpid()):
		return pids, "the agents run in this process: the CPU includes the bench's own"
	case len(pids) > 0 && len(pids) < peers:
		return pids, fmt.Sprintf("%d of %d agents only: give every agent's endpoint in --addr", len(pids), peers)
	case len(pids) > 0:
		return pids, ""
	case remote:
		return nil, "the agents are not on this machine"
	}
	return nil, "the agents did not report their pid (cluster.status has no pid field)"
}

// localEndpoint: a Unix socket, or TCP to a loopback address.
func localEndpoint(ep string) bool {
	hostport, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return true // unix:///path or a bare path
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// cpuTicks sums utime+stime of pids, in clock ticks.
func cpuTicks(pids []int) (uint64, error) {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, fmt.Errorf("cannot read the CPU time of pid %d: %v", pid, err)
		}
		t, err := procStatTicks(string(b))
		if err != nil {
			return 0, fmt.Errorf("pid %d: %v", pid, err)
		}
		sum += t
	}
	return sum, nil
}

// procStatTicks is utime+stime (fields 14 and 15) of a /proc/PID/stat line.
// The command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so fields are counted after the last ')'.
func procStatTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc stat: %v", err)
	}
	return utime + stime, nil
}

// verifyRuns checks that every run in ids succeeded, paging run.list
// (consistent, newest first) down to the oldest of ids: they are UUIDv7s
// made during the bench, so runs older than them are not read.
func verifyRuns(ctx context.Context, eps []string, opts rpc.ClientOptions, callTO time.Duration, ids []string, succeeded *int) error {
	want := make(map[string]bool, len(ids))
	oldest := ""
	for _, id := range ids {
		want[id] = true
		if oldest == "" || id < oldest {
			oldest = id
		}
	}
	cl, err := rpc.NewClient(eps, opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	others := map[domain.RunState]int{}
	var example string
	seen := 0
	cursor := ""
	for {
		lctx, cancel := context.WithTimeout(ctx, callTO)
		res, err := cl.ListRuns(lctx, rpc.ListParams{Limit: 1000, Cursor: cursor, Consistent: true})
		cancel()
		if err != nil {
			return fmt.Errorf("verify: run.list: %w", err)
		}
		for _, r := range res.Runs {
			if !want[r.ID] {
				continue
			}
			seen++
			if r.State == domain.RunSucceeded {
				*succeeded++
				continue
			}
			others[r.State]++
			if example == "" {
				example = fmt.Sprintf("run %s is %s", r.ID, r.State)
			}
		}
		if res.NextCursor == "" || res.NextCursor < oldest {
			break
		}
		cursor = res.NextCursor
	}
	if *succeeded == len(ids) {
		return nil
	}
	var parts []string
	for st, k := range others {
		parts = append(parts, fmt.Sprintf("%d %s", k, st))
	}
	sort.Strings(parts)
	if missing := len(ids) - seen; missing > 0 {
		parts = append(parts, fmt.Sprintf("%d not found", missing))
		if example == "" {
			for _, id := range ids {
				if want[id] {
					example = "e.g. run " + id + " may be missing"
					break
				}
			}
		}
	}
	return failf("inspect one with `flowd run get ID`", "verify: %d of %d runs did not succeed (%s); %s",
		len(ids)-*succeeded, len(ids), strings.Join(parts, ", "), example)
}

func printQueueReport(c *cli.Context, r queueReport) error {
	if jsonOut(c) {
		return printJSON(c.App.Writer, r)
	}
	tw := newTable(c.App.Writer)
	row(tw, "workload", fmt.Sprintf("queue, %s: %d one-task runs, %d producers, %d workers, claim max %d, %d-byte input",
		r.Pacing, r.Jobs, r.Producers, r.Workers, r.ClaimMax, r.PayloadBytes))
	row(tw, "throughput", fmt.Sprintf("%d jobs acked in %.2fs = %.0f jobs/s (first submit to last ack)", r.Acked, r.Seconds, r.JobsPerSecond))
	if p := r.Paced; p != nil {
		verdict := "kept up"
		if !p.KeptUp {
			verdict = "did NOT keep up"
		}
		row(tw, "pace", fmt.Sprintf("target %g jobs/s, achieved %.0f: %s (latest submit %.1f ms behind its slot)",
			p.TargetRate, r.JobsPerSecond, verdict, p.MaxSubmitLagMS))
		row(tw, "latency", fmt.Sprintf("scheduled submit -> durable completion  p50 %.1f ms  p99 %.1f ms  max %.1f ms",
			r.LatencyMS.P50, r.LatencyMS.P99, r.LatencyMS.Max))
	} else {
		row(tw, "latency", fmt.Sprintf("submit -> completion ack  p50 %.1f ms  p99 %.1f ms  max %.1f ms",
			r.LatencyMS.P50, r.LatencyMS.P99, r.LatencyMS.Max))
	}
	row(tw, "run.submit", fmt.Sprintf("p50 %.1f ms  p99 %.1f ms  max %.1f ms", r.SubmitCallMS.P50, r.SubmitCallMS.P99, r.SubmitCallMS.Max))
	leader := ", a follower's commit index: no leader among the endpoints"
	if r.Leader != "" {
		leader = ", leader " + r.Leader
	}
	row(tw, "raft", fmt.Sprintf("%d entries = %.2f per job (%.1f tasks per claim%s)", r.RaftEntries, r.EntriesPerJob, r.AvgClaimSize, leader))
	cpu := "unknown"
	if r.AgentCPUSeconds != nil {
		cpu = fmt.Sprintf("%.2fs = %.2f ms per job (pids %s)", *r.AgentCPUSeconds, *r.AgentCPUMSPerJob, joinInts(r.AgentPIDs))
	}
	if r.CPUNote != "" {
		cpu += " (" + r.CPUNote + ")"
	}
	row(tw, "agent CPU", cpu)
	if r.Rejected > 0 || r.CompleteErrors > 0 {
		row(tw, "lost", fmt.Sprintf("%d completions rejected (lost leases), %d failed", r.Rejected, r.CompleteErrors))
	}
	row(tw, "verified", fmt.Sprintf("%d of %d runs succeeded", r.Succeeded, r.Jobs))
	return tw.Flush()
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// latencyOf is p50, p99 and max in milliseconds (the same ranks as the
// burn-down's percentiles).
func latencyOf(xs []time.Duration) latencyRep {
	if len(xs) == 0 {
		return latencyRep{}
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return latencyRep{P50: ms(xs[len(xs)/2]), P99: ms(xs[len(xs)*99/100]), Max: ms(xs[len(xs)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// benchPause waits d or until ctx ends.
func benchPause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// pauseUntil waits until at; false when ctx ended first.
func pauseUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
