package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc"
)

// The queue run's steps: workers, producers, the watchdog and the
// measurement.

// startWorkers connects every worker (after the producers' endpoints in the
// rotation) and starts its claim loop.
func (r *queueRun) startWorkers() error {
	for w := 0; w < r.cfg.Workers; w++ {
		cl, err := rpc.NewClient(rotate(r.cfg.Endpoints, r.cfg.Producers+w), r.cfg.Client)
		if err != nil {
			return err
		}
		r.clients = append(r.clients, cl)
		r.wwg.Add(1)
		go func(w int) {
			defer r.wwg.Done()
			r.work(cl, fmt.Sprintf("%s-w%d", r.queue, w))
		}(w)
	}
	return nil
}

// work is one worker: long-poll claims until the run ends, and complete
// each task claimed (several at once when a claim brings several).
func (r *queueRun) work(cl *rpc.Client, id string) {
	for r.rctx.Err() == nil {
		cctx, ccancel := context.WithTimeout(r.rctx, r.cfg.CallTimeout+time.Second)
		got, err := cl.TaskClaim(cctx, rpc.ClaimParams{WorkerID: id, Queues: []string{r.queue}, Max: r.cfg.ClaimMax, WaitMS: 1000})
		ccancel()
		if err != nil {
			pause(r.rctx, 50*time.Millisecond) // no hot loop while an agent is away
			continue
		}
		if len(got) == 0 {
			continue
		}
		r.claims.Add(1)
		r.claimed.Add(int64(len(got)))
		if len(got) == 1 {
			r.completeChain(cl, id, got[0])
			continue
		}
		var inner sync.WaitGroup
		for _, t := range got {
			inner.Add(1)
			go func(t rpc.Claimed) {
				defer inner.Done()
				r.completeChain(cl, id, t)
			}(t)
		}
		inner.Wait()
	}
}

// completeChain completes t, then each task that rode back on a completion.
func (r *queueRun) completeChain(cl *rpc.Client, id string, t rpc.Claimed) {
	for next := &t; next != nil; {
		next = r.complete(cl, id, *next)
	}
}

// complete reports t done (claiming the worker's next task in the same call
// with ClaimNext), settles its job and returns the task claimed with it.
func (r *queueRun) complete(cl *rpc.Client, id string, t rpc.Claimed) *rpc.Claimed {
	dctx, dcancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	defer dcancel()
	p := rpc.CompleteParams{TaskID: t.TaskID, FencingToken: t.FencingToken}
	var ack *rpc.AckResult
	var err error
	if r.cfg.ClaimNext && r.rctx.Err() == nil {
		p.Claim = &rpc.ClaimParams{WorkerID: id, Queues: []string{r.queue}, Max: 1}
		if ack, err = cl.TaskCompleteAndClaim(dctx, p); err != nil {
			p.Claim = nil // outcome unknown: report it alone (repeat-safe)
		}
	}
	if p.Claim == nil {
		ack, err = cl.TaskComplete(dctx, p)
	}
	now := time.Now()
	switch {
	case err != nil:
		r.settled(&r.failed)
	case !ack.Accepted:
		r.settled(&r.rejected)
	default:
		if i, ok := r.index.Load(t.RunID); ok {
			r.jobs[i.(int)].acked = now
		}
		r.settled(&r.acked)
	}
	if err == nil && len(ack.Tasks) > 0 {
		r.claims.Add(1) // a claim that rode on the completion
		r.claimed.Add(int64(len(ack.Tasks)))
		return &ack.Tasks[0]
	}
	return nil
}

// startProducers connects every producer and starts its submit loop; the
// jobs are shared out through one counter.
func (r *queueRun) startProducers() {
	var next atomic.Int64
	r.t0 = time.Now()
	for p := 0; p < r.cfg.Producers; p++ {
		cl, err := rpc.NewClient(rotate(r.cfg.Endpoints, p), r.cfg.Client)
		if err != nil {
			r.cancel(err)
			break
		}
		r.clients = append(r.clients, cl)
		r.pwg.Add(1)
		go func() {
			defer r.pwg.Done()
			for r.rctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= r.cfg.Jobs || !r.submit(cl, i) {
					return
				}
			}
		}()
	}
}

// submit submits job i (at its slot when paced); false when the run ended
// or the submit failed (which ends the run).
func (r *queueRun) submit(cl *rpc.Client, i int) bool {
	var slot time.Time
	if r.cfg.Rate > 0 { // open loop: job i's slot is fixed, whatever came before
		slot = r.slot(i)
		if !pauseUntil(r.rctx, slot) {
			return false
		}
	}
	id := uuid.Must(uuid.NewV7()).String()
	r.ids[i] = id
	j := &r.jobs[i]
	j.call = time.Now()
	j.start = j.call
	if r.cfg.Rate > 0 {
		j.start = slot
	}
	r.index.Store(id, i)
	// ctx, not rctx: the last jobs may complete before their submit is
	// answered.
	sctx, scancel := context.WithTimeout(r.ctx, r.cfg.CallTimeout)
	_, err := cl.RunSubmit(sctx, rpc.SubmitParams{Workflow: queueWorkflow(r.queue, i, r.cfg.Payload), ID: id})
	scancel()
	if err != nil {
		r.cancel(fmt.Errorf("submit job %d: %w", i, err))
		return false
	}
	j.submitted = time.Now()
	r.submitted.Add(1)
	return true
}

// watchdog gives up when jobs are outstanding and none settles for the
// stall timeout.
func (r *queueRun) watchdog() {
	stall := r.cfg.Stall
	tick := time.NewTicker(min(time.Second, stall/4))
	defer tick.Stop()
	last, since := int64(-1), time.Now()
	for {
		select {
		case <-r.rctx.Done():
			return
		case now := <-tick.C:
			s := r.total.Load()
			if s != last || r.submitted.Load() == s {
				last, since = s, now
				continue
			}
			if now.Sub(since) >= stall {
				r.cancel(fmt.Errorf("stalled: no job completed for %s (%d of %d acked, %d submitted)",
					stall, r.acked.Load(), r.cfg.Jobs, r.submitted.Load()))
				return
			}
		}
	}
}

// measure reads the cluster after the run and turns the jobs' timestamps,
// the counters and the before/after samples into the report.
func (r *queueRun) measure(before clusterSample) *QueueReport {
	cfg := r.cfg
	after := clusterStatuses(r.ctx, cfg.Endpoints, cfg.Client)
	cpu1, cpuErr1 := cpuTicks(before.pids)
	rep := &QueueReport{Mode: "queue", Pacing: "burst", Jobs: cfg.Jobs, Producers: cfg.Producers, Workers: cfg.Workers,
		ClaimMax: cfg.ClaimMax, PayloadBytes: cfg.Payload}
	if cfg.Rate > 0 {
		rep.Pacing = "paced"
		rep.Paced = &PacedReport{TargetRate: cfg.Rate}
	}
	rep.Acked, rep.Rejected, rep.CompleteErrors = int(r.acked.Load()), int(r.rejected.Load()), int(r.failed.Load())
	r.timings(rep)
	if c := r.claims.Load(); c > 0 {
		rep.AvgClaimSize = float64(r.claimed.Load()) / float64(c)
	}
	if commit1, leader, ok := leaderCommit(after); ok && commit1 >= before.commit {
		rep.RaftEntries, rep.Leader = commit1-before.commit, leader
		rep.EntriesPerJob = float64(rep.RaftEntries) / float64(cfg.Jobs)
	}
	cpuErr := before.cpuErr
	if cpuErr == nil {
		cpuErr = cpuErr1
	}
	rep.AgentPIDs = before.pids
	switch {
	case len(before.pids) == 0:
		rep.CPUNote = before.cpuNote
	case cpuErr != nil:
		rep.CPUNote = cpuErr.Error()
	default:
		secs := float64(cpu1-before.cpu) / clockTicks
		perJob := secs * 1000 / float64(cfg.Jobs)
		rep.AgentCPUSeconds, rep.AgentCPUMSPerJob = &secs, &perJob
		rep.CPUNote = before.cpuNote // caveats: partial, or in process
	}
	return rep
}

// timings fills the throughput, the latencies and (paced) the pace from
// the jobs' timestamps.
func (r *queueRun) timings(rep *QueueReport) {
	var first, last time.Time
	var lat, call []time.Duration
	var maxLag time.Duration
	for i, j := range r.jobs {
		if first.IsZero() || j.call.Before(first) {
			first = j.call
		}
		if !j.submitted.IsZero() {
			call = append(call, j.submitted.Sub(j.call))
		}
		if r.cfg.Rate > 0 {
			maxLag = max(maxLag, j.call.Sub(r.slot(i)))
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
	if rep.Paced != nil {
		rep.Paced.KeptUp = rep.JobsPerSecond >= 0.95*r.cfg.Rate
		rep.Paced.MaxSubmitLagMS = ms(maxLag)
	}
}
