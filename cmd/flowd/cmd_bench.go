package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, benchCommand) }

var benchCommand = &cli.Command{
	Name:  "bench",
	Usage: "measure end-to-end throughput and latency through the sockets (queue or burn-down workload)",
	Description: `--mode queue (the default) is the job-queue workload: --producers
producers submit --jobs one-task runs, one run.submit per job (a client-chosen
UUIDv7 id, a --payload-byte JSON task input), while --workers workers
long-poll task.claim (up to --claim-max tasks, wait_ms 1000) and complete
each task with its fencing token; every producer and worker has its own
connection, spread over the endpoints. Without --rate the producers submit as
fast as they can (burst): it reports jobs/s (N / first submit to last
completion ack) and submit->ack latency p50/p99/max. With --rate R the
submits are scheduled open loop at R jobs/s (a late submit does not delay the
next, beyond the producer pool): it reports the latency from each job's
scheduled submit to its durable completion, and whether the cluster kept up
(achieved jobs/s at least 95% of R). Both report raft entries per job (the
leader's commit_index delta / N) and agent CPU per job (utime+stime from
/proc/PID/stat of local agents, pids from --spawn or cluster.status; unknown
when /proc/PID cannot be read), then check that every run succeeded.

--mode burndown submits --tasks tasks first (in runs of --per-run independent
tasks), then runs --workers workers that long-poll claims of up to --max tasks
and complete each one, and reports tasks/s and latency percentiles.

With --spawn it starts its own three-agent cluster (flowd dev, no demo
workers) in a temporary directory first.

Numbers on a shared machine are noisy: compare runs on the same machine, as
ratios (e.g. against the raw raft benchmark in cluster/bench_test.go).`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "mode", Value: "queue", Usage: "workload: queue or burndown", EnvVars: []string{"FLOWD_BENCH_MODE"}},
		&cli.IntFlag{Name: "jobs", Value: 10000, Usage: "queue: one-task runs to submit", EnvVars: []string{"FLOWD_BENCH_JOBS"}},
		&cli.IntFlag{Name: "producers", Value: 8, Usage: "queue: concurrent producers (one run.submit per job)", EnvVars: []string{"FLOWD_BENCH_PRODUCERS"}},
		&cli.IntFlag{Name: "claim-max", Value: 1, Usage: "queue: tasks per claim", EnvVars: []string{"FLOWD_BENCH_CLAIM_MAX"}},
		&cli.BoolFlag{Name: "claim-next", Value: true, Usage: "queue: each completion claims the worker's next task in the same call, as the SDK does (--claim-next=false: one long-poll claim per task, as a bare client would)", EnvVars: []string{"FLOWD_BENCH_CLAIM_NEXT"}},
		&cli.Float64Flag{Name: "rate", Usage: "queue: submit open loop at this many jobs/s (0 = burst, as fast as the producers go)", EnvVars: []string{"FLOWD_BENCH_RATE"}},
		&cli.IntFlag{Name: "payload", Value: 200, Usage: "queue: bytes of JSON task input per job", EnvVars: []string{"FLOWD_BENCH_PAYLOAD"}},
		&cli.DurationFlag{Name: "stall-timeout", Value: 30 * time.Second, Usage: "queue: give up when no job completes for this long", EnvVars: []string{"FLOWD_BENCH_STALL_TIMEOUT"}},
		&cli.IntFlag{Name: "tasks", Value: 20000, Usage: "burndown: tasks to run", EnvVars: []string{"FLOWD_BENCH_TASKS"}},
		&cli.IntFlag{Name: "per-run", Value: 10, Usage: "burndown: independent tasks per run", EnvVars: []string{"FLOWD_BENCH_PER_RUN"}},
		&cli.IntFlag{Name: "workers", Value: 64, Usage: "concurrent workers", EnvVars: []string{"FLOWD_BENCH_WORKERS"}},
		&cli.IntFlag{Name: "max", Value: 8, Usage: "burndown: tasks per claim", EnvVars: []string{"FLOWD_BENCH_MAX"}},
		&cli.IntFlag{Name: "submitters", Value: 32, Usage: "burndown: concurrent submitters", EnvVars: []string{"FLOWD_BENCH_SUBMITTERS"}},
		&cli.BoolFlag{Name: "spawn", Usage: "start a local three-agent cluster for the run", EnvVars: []string{"FLOWD_BENCH_SPAWN"}},
		&cli.IntFlag{Name: "base-port", Value: 17001, Usage: "with --spawn: raft port of n1", EnvVars: []string{"FLOWD_BENCH_BASE_PORT"}},
	},
	Action: runBench,
}

type benchReport struct {
	Tasks          int     `json:"tasks"`
	Runs           int     `json:"runs"`
	Workers        int     `json:"workers"`
	MaxPerClaim    int     `json:"max_per_claim"`
	SubmitSeconds  float64 `json:"submit_seconds"`
	SubmitTasksSec float64 `json:"submit_tasks_per_second"`
	RunSeconds     float64 `json:"run_seconds"`
	TasksPerSecond float64 `json:"tasks_per_second"`
	AvgClaimSize   float64 `json:"avg_claim_size"`
	ClaimP50MS     float64 `json:"claim_p50_ms"`
	ClaimP99MS     float64 `json:"claim_p99_ms"`
	CompleteP50MS  float64 `json:"complete_p50_ms"`
	CompleteP99MS  float64 `json:"complete_p99_ms"`
	Rejected       int64   `json:"rejected"`
}

func runBench(c *cli.Context) error {
	mode := c.String("mode")
	if mode != "queue" && mode != "burndown" {
		return usageErr(c, "--mode %q: want queue or burndown", mode)
	}
	eps := endpoints(c)
	var pids []int
	if c.Bool("spawn") {
		stop, addr, spawned, err := spawnCluster(c)
		if err != nil {
			return err
		}
		defer stop()
		eps, pids = strings.Split(addr, ","), spawned
	}
	if len(eps) == 0 {
		return usageErr(c, "--addr is empty: give at least one agent endpoint, or --spawn")
	}
	if mode == "queue" {
		return runQueueBench(c, eps, pids)
	}
	return runBurndown(c, eps)
}

// runBurndown submits every task first, then burns the backlog down.
func runBurndown(c *cli.Context, eps []string) error {
	n, perRun, workers, max := c.Int("tasks"), max(c.Int("per-run"), 1), c.Int("workers"), c.Int("max")
	if n <= 0 || workers <= 0 || max <= 0 {
		return usageErr(c, "--tasks, --workers and --max must be positive")
	}
	runs := (n + perRun - 1) / perRun
	auth := rpc.ClientOptions{Logger: discardLogger}
	var err error
	if auth.Token, auth.TLS, err = clientAuth(c); err != nil {
		return err
	}
	rep := benchReport{Tasks: runs * perRun, Runs: runs, Workers: workers, MaxPerClaim: max}
	ctx := c.Context
	queue := "bench-" + uuid.NewString()[:8] // isolates this run from other work

	// Submit.
	var tasks []json.RawMessage
	for i := 0; i < perRun; i++ {
		tasks = append(tasks, json.RawMessage(fmt.Sprintf(`{"key":"t%d","type":"bench","queue":%q}`, i, queue)))
	}
	wf, _ := json.Marshal(map[string]any{"name": "bench", "tasks": tasks})
	fmt.Fprintf(c.App.ErrWriter, "submitting %d tasks in %d runs with %d submitters...\n", rep.Tasks, runs, c.Int("submitters"))
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, c.Int("submitters"))
	for s := 0; s < c.Int("submitters"); s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			cl, err := rpc.NewClient(rotate(eps, s), auth)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for next.Add(1) <= int64(runs) {
				if _, err := cl.Submit(ctx, rpc.SubmitParams{Workflow: wf, ID: uuid.Must(uuid.NewV7()).String()}); err != nil {
					errs <- err
					return
				}
			}
		}(s)
	}
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("submit: %w", err)
	default:
	}
	rep.SubmitSeconds = time.Since(t0).Seconds()
	rep.SubmitTasksSec = float64(rep.Tasks) / rep.SubmitSeconds

	// Run.
	fmt.Fprintf(c.App.ErrWriter, "running with %d workers, up to %d tasks per claim...\n", workers, max)
	var done, claims, claimed, rejected atomic.Int64
	claimLat := make([][]time.Duration, workers)
	completeLat := make([][]time.Duration, workers)
	t1 := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl, err := rpc.NewClient(rotate(eps, w), auth)
			if err != nil {
				return
			}
			defer cl.Close()
			id := fmt.Sprintf("bench-%d", w)
			for done.Load() < int64(rep.Tasks) && rctx.Err() == nil {
				c0 := time.Now()
				got, err := cl.Claim(rctx, rpc.ClaimParams{WorkerID: id, Queues: []string{queue}, Max: max, WaitMS: 1000})
				if err != nil {
					continue
				}
				if len(got) == 0 {
					continue
				}
				claimLat[w] = append(claimLat[w], time.Since(c0))
				claims.Add(1)
				claimed.Add(int64(len(got)))
				var inner sync.WaitGroup
				var mu sync.Mutex
				for _, t := range got {
					inner.Add(1)
					go func(t rpc.Claimed) {
						defer inner.Done()
						d0 := time.Now()
						ack, err := cl.Complete(rctx, rpc.CompleteParams{TaskID: t.TaskID, FencingToken: t.FencingToken})
						if err != nil || !ack.Accepted {
							rejected.Add(1)
							return
						}
						mu.Lock()
						completeLat[w] = append(completeLat[w], time.Since(d0))
						mu.Unlock()
						if done.Add(1) == int64(rep.Tasks) {
							cancel()
						}
					}(t)
				}
				inner.Wait()
			}
		}(w)
	}
	wg.Wait()
	rep.RunSeconds = time.Since(t1).Seconds()
	rep.TasksPerSecond = float64(done.Load()) / rep.RunSeconds
	if claims.Load() > 0 {
		rep.AvgClaimSize = float64(claimed.Load()) / float64(claims.Load())
	}
	rep.ClaimP50MS, rep.ClaimP99MS = percentiles(claimLat)
	rep.CompleteP50MS, rep.CompleteP99MS = percentiles(completeLat)
	rep.Rejected = rejected.Load()
	if done.Load() < int64(rep.Tasks) {
		return fmt.Errorf("only %d of %d tasks completed", done.Load(), rep.Tasks)
	}
	if jsonOut(c) {
		return printJSON(c.App.Writer, rep)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "submit:   %d tasks in %.2fs = %.0f tasks/s\n", rep.Tasks, rep.SubmitSeconds, rep.SubmitTasksSec)
	fmt.Fprintf(w, "execute:  %d tasks in %.2fs = %.0f tasks/s (%d workers, %.1f tasks per claim)\n", rep.Tasks, rep.RunSeconds, rep.TasksPerSecond, workers, rep.AvgClaimSize)
	fmt.Fprintf(w, "latency:  claim p50 %.1f ms p99 %.1f ms; complete p50 %.1f ms p99 %.1f ms\n", rep.ClaimP50MS, rep.ClaimP99MS, rep.CompleteP50MS, rep.CompleteP99MS)
	if rep.Rejected > 0 {
		fmt.Fprintf(w, "rejected: %d completions (lost leases)\n", rep.Rejected)
	}
	return nil
}

// rotate starts the endpoint list at i, spreading clients over the nodes.
func rotate(eps []string, i int) []string {
	k := i % len(eps)
	return append(append([]string(nil), eps[k:]...), eps[:k]...)
}

func percentiles(all [][]time.Duration) (p50, p99 float64) {
	l := latencyOf(slices.Concat(all...))
	return l.P50, l.P99
}

// spawnCluster starts `flowd dev --concurrency 0` in a temp dir and returns
// a stop function, its FLOWD_ADDR and the agents' pids (from the
// "  n1  pid 1234  unix://..." lines it prints before the export line).
func spawnCluster(c *cli.Context) (func(), string, []int, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", nil, err
	}
	dir, err := os.MkdirTemp("", "flowd-bench")
	if err != nil {
		return nil, "", nil, err
	}
	cmd := exec.Command(self, "dev", "--dir", filepath.Join(dir, "cluster"), "--concurrency", "0",
		"--base-port", fmt.Sprint(c.Int("base-port")), "--http-base-port", "0")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = c.App.ErrWriter
	if err := cmd.Start(); err != nil {
		return nil, "", nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	sc := bufio.NewScanner(out)
	var pids []int
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[1] == "pid" {
			if pid, err := strconv.Atoi(f[2]); err == nil {
				pids = append(pids, pid)
			}
		}
		if addr, ok := strings.CutPrefix(sc.Text(), "export FLOWD_ADDR="); ok {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return stop, addr, pids, nil
		}
	}
	stop()
	return nil, "", nil, errors.New("the spawned cluster did not come up; run `flowd dev` to see why")
}
