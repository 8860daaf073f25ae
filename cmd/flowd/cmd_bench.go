package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/internal/bench"
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
ratios (e.g. against the raw raft benchmark in cluster/raftnode/bench_test.go).`,
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

// runQueueBench runs the queue workload (bench.RunQueue) and prints its
// report.
func runQueueBench(c *cli.Context, eps []string, spawnedPIDs []int) error {
	cfg := bench.QueueConfig{Endpoints: eps, SpawnedPIDs: spawnedPIDs,
		Jobs: c.Int("jobs"), Producers: c.Int("producers"), Workers: c.Int("workers"), ClaimMax: c.Int("claim-max"),
		ClaimNext: c.Bool("claim-next"), Rate: c.Float64("rate"), Payload: c.Int("payload"),
		Stall: c.Duration("stall-timeout"), CallTimeout: callTimeout(c), Progress: c.App.ErrWriter}
	switch {
	case cfg.Jobs <= 0 || cfg.Producers <= 0 || cfg.Workers <= 0 || cfg.ClaimMax <= 0:
		return usageErr(c, "--jobs, --producers, --workers and --claim-max must be positive")
	case cfg.Rate < 0:
		return usageErr(c, "--rate must be >= 0 (0 = burst)")
	case cfg.Payload < 0:
		return usageErr(c, "--payload must be >= 0")
	case cfg.Stall <= 0:
		return usageErr(c, "--stall-timeout must be positive")
	}
	cfg.Client = rpc.ClientOptions{Logger: discardLogger, DialTimeout: min(2*time.Second, cfg.CallTimeout)}
	var err error
	if cfg.Client.Token, cfg.Client.TLS, err = clientAuth(c); err != nil {
		return err
	}
	rep, err := bench.RunQueue(c.Context, cfg)
	if rep == nil {
		return err
	}
	if perr := printQueueReport(c, rep); perr != nil {
		return perr
	}
	if ve, ok := errors.AsType[*bench.VerifyError](err); ok {
		return failf("inspect one with `flowd run get ID`", "%s", ve.Error())
	}
	return err
}

// runBurndown runs the burn-down workload (bench.RunBurndown) and prints
// its report.
func runBurndown(c *cli.Context, eps []string) error {
	cfg := bench.BurndownConfig{Endpoints: eps, Tasks: c.Int("tasks"), PerRun: max(c.Int("per-run"), 1),
		Workers: c.Int("workers"), Max: c.Int("max"), Submitters: c.Int("submitters"), Progress: c.App.ErrWriter}
	if cfg.Tasks <= 0 || cfg.Workers <= 0 || cfg.Max <= 0 {
		return usageErr(c, "--tasks, --workers and --max must be positive")
	}
	cfg.Client = rpc.ClientOptions{Logger: discardLogger}
	var err error
	if cfg.Client.Token, cfg.Client.TLS, err = clientAuth(c); err != nil {
		return err
	}
	rep, err := bench.RunBurndown(c.Context, cfg)
	if err != nil {
		return err
	}
	if jsonOut(c) {
		return printJSON(c.App.Writer, rep)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "submit:   %d tasks in %.2fs = %.0f tasks/s\n", rep.Tasks, rep.SubmitSeconds, rep.SubmitTasksSec)
	fmt.Fprintf(w, "execute:  %d tasks in %.2fs = %.0f tasks/s (%d workers, %.1f tasks per claim)\n", rep.Tasks, rep.RunSeconds, rep.TasksPerSecond, rep.Workers, rep.AvgClaimSize)
	fmt.Fprintf(w, "latency:  claim p50 %.1f ms p99 %.1f ms; complete p50 %.1f ms p99 %.1f ms\n", rep.ClaimP50MS, rep.ClaimP99MS, rep.CompleteP50MS, rep.CompleteP99MS)
	if rep.Rejected > 0 {
		fmt.Fprintf(w, "rejected: %d completions (lost leases)\n", rep.Rejected)
	}
	return nil
}

// printQueueReport prints the queue workload's report as a table, or as
// JSON with --output json.
func printQueueReport(c *cli.Context, r *bench.QueueReport) error {
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
