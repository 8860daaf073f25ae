package main

import (
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/bench"
	"github.com/flowd/flowd/rpc"
)

// TestBenchQueue runs the queue workload, burst and paced, against an
// in-process cluster and checks that the report adds up. No timing is
// asserted: only counts, and the order of the percentiles.
func TestBenchQueue(t *testing.T) {
	tc := startCluster(t)
	const jobs = 200
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{"burst", nil},
		{"paced", []string{"--rate", "500"}},
		{"burst claim-max 4", []string{"--claim-max", "4"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--output", "json", "bench", "--mode", "queue", "--jobs", "200",
				"--workers", "4", "--producers", "4"}, tt.extra...)
			r := tc.must(t, 0, args...)
			var rep bench.QueueReport
			if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
				t.Fatalf("report is not JSON: %v\n%s", err, r)
			}
			if rep.Mode != "queue" || rep.Jobs != jobs || rep.Acked != jobs || rep.Succeeded != jobs ||
				rep.Rejected != 0 || rep.CompleteErrors != 0 {
				t.Fatalf("want %d jobs acked and succeeded, none lost:\n%s", jobs, r.out)
			}
			if rep.PayloadBytes != 200 || rep.Producers != 4 || rep.Workers != 4 {
				t.Errorf("parameters not reported: %+v", rep)
			}
			if rep.RaftEntries == 0 || rep.EntriesPerJob <= 0 || rep.EntriesPerJob != float64(rep.RaftEntries)/jobs {
				t.Errorf("raft entries %d, per job %v: want > 0 and consistent", rep.RaftEntries, rep.EntriesPerJob)
			}
			if rep.Seconds <= 0 || rep.JobsPerSecond <= 0 {
				t.Errorf("seconds %v, jobs/s %v: want > 0", rep.Seconds, rep.JobsPerSecond)
			}
			if got := rep.JobsPerSecond * rep.Seconds; got < jobs-0.01 || got > jobs+0.01 {
				t.Errorf("jobs/s × seconds = %v, want %d", got, jobs)
			}
			for name, l := range map[string]bench.Latency{"latency": rep.LatencyMS, "submit call": rep.SubmitCallMS} {
				if !(0 <= l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) || l.Max == 0 {
					t.Errorf("%s %+v: want 0 <= p50 <= p99 <= max, max > 0", name, l)
				}
			}
			max := 1
			if slices.Contains(tt.extra, "--claim-max") {
				max = 4
			}
			if rep.ClaimMax != max || rep.AvgClaimSize < 1 || rep.AvgClaimSize > float64(max) {
				t.Errorf("claim max %d, avg claim %v: want 1 <= avg <= %d", rep.ClaimMax, rep.AvgClaimSize, max)
			}
			paced := slices.Contains(tt.extra, "--rate")
			switch {
			case paced && (rep.Pacing != "paced" || rep.Paced == nil || rep.Paced.TargetRate != 500 || rep.Paced.MaxSubmitLagMS < 0):
				t.Errorf("paced run reports %q %+v", rep.Pacing, rep.Paced)
			case !paced && (rep.Pacing != "burst" || rep.Paced != nil):
				t.Errorf("burst run reports %q %+v", rep.Pacing, rep.Paced)
			}
			// The in-process agents all report this process's pid.
			if !slices.Equal(rep.AgentPIDs, []int{os.Getpid()}) {
				t.Errorf("agent pids %v, want [%d]", rep.AgentPIDs, os.Getpid())
			}
			if runtime.GOOS == "linux" && (rep.AgentCPUSeconds == nil || rep.AgentCPUMSPerJob == nil || *rep.AgentCPUSeconds < 0) {
				t.Errorf("agent CPU unknown on linux: %q", rep.CPUNote)
			}
		})
	}
	t.Run("table", func(t *testing.T) {
		r := tc.must(t, 0, "bench", "--jobs", "20", "--workers", "2", "--producers", "2", "--rate", "1000")
		for _, want := range []string{"queue, paced: 20 one-task runs", "jobs/s", "target 1000 jobs/s", "per job", "20 of 20 runs succeeded"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("table lacks %q:\n%s", want, r)
			}
		}
	})
	t.Run("burndown stays", func(t *testing.T) {
		r := tc.must(t, 0, "bench", "--mode", "burndown", "--tasks", "40", "--per-run", "10", "--workers", "4", "--submitters", "2")
		for _, want := range []string{"submit:   40 tasks in ", "execute:  40 tasks in ", "(4 workers, ", "latency:  claim p50 "} {
			if !strings.Contains(r.out, want) {
				t.Errorf("burn-down output lacks %q:\n%s", want, r)
			}
		}
	})
	t.Run("verify reports runs that did not succeed", func(t *testing.T) {
		// No worker claims anything here but the bench's own: the run stays running.
		const running, missing = "01990000-0000-7000-8000-000000000001", "01990000-0000-7000-8000-000000000002"
		if r := tc.flowdIn(t, strings.NewReader(`{"name":"stuck","tasks":[{"key":"a","type":"nobody"}]}`),
			"submit", "-", "--id", running); r.code != 0 {
			t.Fatal(r)
		}
		var succeeded int
		err := bench.VerifyRuns(t.Context(), tc.eps, rpc.ClientOptions{Logger: discardLogger}, 10*time.Second,
			[]string{running, missing}, &succeeded)
		if err == nil || succeeded != 0 || !strings.Contains(err.Error(), "2 of 2 runs did not succeed (1 running, 1 not found)") {
			t.Errorf("verifyRuns = %d, %v", succeeded, err)
		}
	})
	t.Run("bad mode", func(t *testing.T) {
		tc.must(t, 2, "bench", "--mode", "nope")
	})
}
