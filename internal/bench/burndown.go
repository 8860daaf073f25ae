package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc"
)

// The burn-down workload: submit every task first, then burn the backlog
// down.

// BurndownConfig is the burn-down workload's input (the CLI's flags,
// validated).
type BurndownConfig struct {
	Endpoints  []string
	Tasks      int // tasks to run (rounded up to whole runs)
	PerRun     int // independent tasks per run
	Workers    int
	Max        int // tasks per claim
	Submitters int
	Client     rpc.ClientOptions
	Progress   io.Writer // a progress line before each phase
}

// BurndownReport is the burn-down workload's result (the `--output json`
// shape).
type BurndownReport struct {
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

// RunBurndown runs the burn-down workload; an error when it did not
// complete every task.
func RunBurndown(ctx context.Context, cfg BurndownConfig) (*BurndownReport, error) {
	runs := (cfg.Tasks + cfg.PerRun - 1) / cfg.PerRun
	rep := &BurndownReport{Tasks: runs * cfg.PerRun, Runs: runs, Workers: cfg.Workers, MaxPerClaim: cfg.Max}
	queue := "bench-" + uuid.NewString()[:8] // isolates this run from other work
	if err := submitBacklog(ctx, cfg, queue, rep); err != nil {
		return nil, err
	}
	if err := burnDown(ctx, cfg, queue, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// submitBacklog submits rep.Runs runs of cfg.PerRun tasks from
// cfg.Submitters connections and times it.
func submitBacklog(ctx context.Context, cfg BurndownConfig, queue string, rep *BurndownReport) error {
	var tasks []json.RawMessage
	for i := 0; i < cfg.PerRun; i++ {
		tasks = append(tasks, json.RawMessage(fmt.Sprintf(`{"key":"t%d","type":"bench","queue":%q}`, i, queue)))
	}
	wf, _ := json.Marshal(map[string]any{"name": "bench", "tasks": tasks})
	fmt.Fprintf(cfg.Progress, "submitting %d tasks in %d runs with %d submitters...\n", rep.Tasks, rep.Runs, cfg.Submitters)
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Submitters)
	for s := 0; s < cfg.Submitters; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			cl, err := rpc.NewClient(rotate(cfg.Endpoints, s), cfg.Client)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for next.Add(1) <= int64(rep.Runs) {
				if _, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf, ID: uuid.Must(uuid.NewV7()).String()}); err != nil {
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
	return nil
}

// burnState is the burn-down phase's parameters, counters and samples.
type burnState struct {
	cfg    BurndownConfig
	queue  string
	total  int             // tasks to complete
	rctx   context.Context // the phase's: cancelled when total are done
	cancel context.CancelFunc

	done, claims, claimed, rejected atomic.Int64
	claimLat, completeLat           [][]time.Duration // per worker
}

// burnDown runs cfg.Workers workers until every task is complete and fills
// the execution half of the report.
func burnDown(ctx context.Context, cfg BurndownConfig, queue string, rep *BurndownReport) error {
	fmt.Fprintf(cfg.Progress, "running with %d workers, up to %d tasks per claim...\n", cfg.Workers, cfg.Max)
	s := &burnState{cfg: cfg, queue: queue, total: rep.Tasks,
		claimLat: make([][]time.Duration, cfg.Workers), completeLat: make([][]time.Duration, cfg.Workers)}
	t1 := time.Now()
	s.rctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s.work(w)
		}(w)
	}
	wg.Wait()
	rep.RunSeconds = time.Since(t1).Seconds()
	rep.TasksPerSecond = float64(s.done.Load()) / rep.RunSeconds
	if s.claims.Load() > 0 {
		rep.AvgClaimSize = float64(s.claimed.Load()) / float64(s.claims.Load())
	}
	rep.ClaimP50MS, rep.ClaimP99MS = percentiles(s.claimLat)
	rep.CompleteP50MS, rep.CompleteP99MS = percentiles(s.completeLat)
	rep.Rejected = s.rejected.Load()
	if s.done.Load() < int64(rep.Tasks) {
		return fmt.Errorf("only %d of %d tasks completed", s.done.Load(), rep.Tasks)
	}
	return nil
}

// work is worker w: claim up to cfg.Max tasks, complete them all
// concurrently, until total tasks are done (then it cancels the phase).
func (s *burnState) work(w int) {
	cfg, queue, total, rctx := s.cfg, s.queue, s.total, s.rctx
	cl, err := rpc.NewClient(rotate(cfg.Endpoints, w), cfg.Client)
	if err != nil {
		return
	}
	defer cl.Close()
	id := fmt.Sprintf("bench-%d", w)
	for s.done.Load() < int64(total) && rctx.Err() == nil {
		c0 := time.Now()
		got, err := cl.TaskClaim(rctx, rpc.ClaimParams{WorkerID: id, Queues: []string{queue}, Max: cfg.Max, WaitMS: 1000})
		if err != nil || len(got) == 0 {
			continue
		}
		s.claimLat[w] = append(s.claimLat[w], time.Since(c0))
		s.claims.Add(1)
		s.claimed.Add(int64(len(got)))
		var inner sync.WaitGroup
		var mu sync.Mutex
		for _, t := range got {
			inner.Add(1)
			go func(t rpc.Claimed) {
				defer inner.Done()
				d0 := time.Now()
				ack, err := cl.TaskComplete(rctx, rpc.CompleteParams{TaskID: t.TaskID, FencingToken: t.FencingToken})
				if err != nil || !ack.Accepted {
					s.rejected.Add(1)
					return
				}
				mu.Lock()
				s.completeLat[w] = append(s.completeLat[w], time.Since(d0))
				mu.Unlock()
				if s.done.Add(1) == int64(total) {
					s.cancel()
				}
			}(t)
		}
		inner.Wait()
	}
}
