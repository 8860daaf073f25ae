package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// waitChunk is how long one run.wait call blocks. run.wait returns as soon
// as the run is done, so this only sets how often progress can refresh; no
// state is polled.
const waitChunk = time.Second

// waitRun waits until the run is done (succeeded, failed, cancelled,
// reverted) or timeout passes (0: no limit), showing "tasks done/total" on
// the app's stderr. It returns the last view of the run and whether it is
// done.
//
// fresh says the run was just created by this command: a not_found from an
// agent that has not applied the submission yet is retried for a moment.
func waitRun(cCtx *cli.Context, c *rpc.Client, id string, timeout time.Duration, since time.Time, fresh bool) (*rpc.Run, bool, error) {
	start := time.Now()
	backoff := 10 * time.Millisecond
	var deadline time.Time
	if timeout > 0 {
		deadline = since.Add(timeout)
	}
	prog := newProgress(cCtx.App.ErrWriter)
	defer prog.end()
	warn := workerWarning{warned: map[string]bool{}}
	var last *rpc.Run
	moved, done := start, -1 // when the run last finished a task, and how many it had
	for {
		chunk := waitChunk
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 && last != nil {
				return last, false, nil
			}
			chunk = max(0, min(chunk, left))
		}
		limit := chunk + callTimeout(cCtx)
		if !deadline.IsZero() {
			// --wait-timeout bounds the command, not only the waiting: a
			// call held by an agent that lost its leader ends with it.
			limit = min(limit, max(time.Until(deadline), 0)+waitSlack)
		}
		ctx, cancel := context.WithTimeout(cCtx.Context, limit)
		res, err := c.RunWait(ctx, id, chunk.Milliseconds())
		timedOut := ctx.Err() != nil && cCtx.Context.Err() == nil
		cancel()
		if err != nil && timedOut && last != nil && !deadline.IsZero() && !time.Now().Before(deadline) {
			return last, false, nil // --wait-timeout passed: exit 4
		}
		if err != nil && last == nil && fresh && isCode(err, rpc.CodeNotFound) && time.Since(start) < freshLag {
			// We just created the run through an agent that follows: it
			// resolves ids from its own state, which may not have applied
			// the submission yet. Give it a moment.
			if werr := pause(cCtx.Context, &backoff); werr != nil {
				return nil, false, err
			}
			continue
		}
		if err != nil {
			return last, false, err
		}
		last = &res.Run
		prog.show(last)
		if res.Done {
			return last, true, nil
		}
		if last.Done != done {
			moved, done = time.Now(), last.Done
		}
		if time.Since(moved) >= workerWarnAfter { // stalled: say why
			warn.check(cCtx, c, id, prog)
		}
	}
}

// waitSlack is how long past --wait-timeout a call may take to answer
// before the command gives up on it.
const waitSlack = 500 * time.Millisecond

// workerWarnAfter is how long a wait runs before it asks whether the run
// waits for a task type no worker serves.
var workerWarnAfter = 3 * time.Second

// workerWarning tells, once per type, that the waited-for run has ready
// tasks of a type no live worker claims (run.get waiting_for_worker), and
// once per reason why else it waits (run.get waiting_on) with the command
// that lifts it.
type workerWarning struct {
	warned map[string]bool
	next   time.Time
}

func (w *workerWarning) check(cCtx *cli.Context, c *rpc.Client, id string, prog *progress) {
	if time.Now().Before(w.next) {
		return
	}
	w.next = time.Now().Add(time.Second) // the agents answer from a ~1 s view
	ctx, cancel := context.WithTimeout(cCtx.Context, callTimeout(cCtx))
	r, err := c.RunGet(ctx, id)
	cancel()
	if err != nil {
		return // only a hint: the wait goes on
	}
	for _, typ := range r.WaitingForWorker {
		if w.warned[typ] {
			continue
		}
		w.warned[typ] = true
		cmd := "flowd worker run --type " + typ
		for _, q := range readyQueuesOf(r, typ) {
			if q != "default" {
				cmd += " --queue " + q
			}
		}
		prog.interrupt()
		fmt.Fprintf(cCtx.App.ErrWriter, "warning: no worker has claimed type %q lately (the agents' --idle-type-after, 30s unless set); start one with `%s --exec CMD`, or see `flowd worker list`\n", typ, cmd)
	}
	for _, wo := range r.WaitingOn {
		key := "waiting_on " + wo.Reason + " " + wo.Queue + " " + wo.Type
		if wo.Reason == "no_worker" || w.warned[key] {
			continue // no_worker: the warning above
		}
		w.warned[key] = true
		prog.interrupt()
		fmt.Fprintln(cCtx.App.ErrWriter, "waiting: "+waitingText(wo))
	}
}

// waitingText is a waiting_on reason in a line: what holds the run and the
// command that lifts it.
func waitingText(wo rpc.WaitingOn) string {
	s := wo.Message
	if wo.Command != "" {
		s += "; lift it with `" + wo.Command + "`"
	}
	return s
}

// readyQueuesOf lists the queues of r's ready tasks of type typ.
func readyQueuesOf(r *rpc.Run, typ string) []string {
	var qs []string
	for _, t := range r.Tasks {
		if t.Type == typ && (t.State == domain.TaskReady || t.State == domain.TaskReverting) && !slices.Contains(qs, t.Queue) {
			qs = append(qs, t.Queue)
		}
	}
	return qs
}

// freshLag bounds how long a just-created run may be unknown to the agent
// the client talks to.
const freshLag = 5 * time.Second

// pause waits *d (doubling it, up to 250ms) or until ctx ends.
func pause(ctx context.Context, d *time.Duration) error {
	t := time.NewTimer(*d)
	defer t.Stop()
	*d = min(2**d, 250*time.Millisecond)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isCode(err error, code int) bool {
	pe, ok := errors.AsType[*rpc.Error](err)
	return ok && pe.Code == code
}

// progress shows a run's progress: rewritten in place on a terminal, one
// line per change otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	last string
}

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

func (p *progress) show(r *rpc.Run) {
	line := fmt.Sprintf("run %s %s  tasks %d/%d", shortID(r.ID), StateLabel(string(r.State)), r.Done, r.TaskCount)
	if line == p.last || (!p.tty && r.State.Done()) {
		return // without a terminal the outcome line alone says how it ended
	}
	p.last = line
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K"+line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// interrupt ends a progress line rewritten in place so another line can be
// printed; the next show starts a new one.
func (p *progress) interrupt() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
		p.last = ""
	}
}

func (p *progress) end() {
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
	}
}

// runOutcome prints how a waited-for run ended and returns its exit code:
// 0 succeeded, 3 failed/cancelled/reverted, 4 not done within timeout.
func runOutcome(cCtx *cli.Context, r *rpc.Run, done bool, timeout time.Duration) error {
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		if err := printJSON(w, r); err != nil {
			return err
		}
	}
	if !done {
		fmt.Fprintf(cCtx.App.ErrWriter, "timed out after %s: run %s is still %s (tasks %d/%d)\nhint: wait again with `flowd run wait %s`, or watch it with `flowd run watch %s`\n",
			timeout, shortID(r.ID), StateLabel(string(r.State)), r.Done, r.TaskCount, shortID(r.ID), shortID(r.ID))
		return exitWith(exitTimeout)
	}
	if !jsonOut(cCtx) {
		p := newPainter(cCtx, w)
		took := span(r.StartedAt, r.FinishedAt)
		if r.StartedAt.IsZero() {
			took = span(r.CreatedAt, r.FinishedAt)
		}
		fmt.Fprintf(w, "run %s %s in %s (%d/%d tasks done)\n", shortID(r.ID), p.state(string(r.State)), took, r.Done, r.TaskCount)
		if r.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", r.Reason)
		}
		for _, t := range r.Tasks {
			if t.State == domain.TaskFailed || (t.Error != "" && r.State != domain.RunSucceeded) {
				fmt.Fprintf(w, "  %s %s: %s\n", p.state(string(t.State)), t.Key, oneLine(dash(t.Error), 200))
			}
		}
	}
	if r.State == domain.RunSucceeded {
		return nil
	}
	return exitWith(exitRunUnsuc)
}
