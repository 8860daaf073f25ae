package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// verbGoal is the state run cancel and run revert --wait wait for: the
// command succeeds (exit 0) when the run ends there, else exit 3.
var verbGoal = map[string]domain.RunState{
	"cancel": domain.RunCancelled,
	"revert": domain.RunReverted,
}

// verbWaitFlags are --wait and --wait-timeout for the verbs with a goal.
func verbWaitFlags(name string) []cli.Flag {
	goal, ok := verbGoal[name]
	if !ok {
		return nil
	}
	return []cli.Flag{
		&cli.BoolFlag{Name: "wait", Aliases: []string{"w"},
			Usage: fmt.Sprintf("wait until the run is done: exit 0 when it ends %s, 3 otherwise, 4 after --wait-timeout", goal)},
		waitTimeoutFlag(),
	}
}

// verbAfter finishes a run verb whose answer left r: with --wait it waits
// for the run to be done; a resume that changed nothing on a run that
// ended says what does apply to it.
func verbAfter(cCtx *cli.Context, name string, changed bool, r *rpc.Run) error {
	if name == "resume" && !changed && r.State.Done() {
		fmt.Fprintln(cCtx.App.ErrWriter, "hint: "+resumeHint(shortID(r.ID), r.State))
	}
	if !cCtx.Bool("wait") {
		return nil
	}
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := cCtx.Duration("wait-timeout")
	last, done, err := waitRun(cCtx, c, r.ID, timeout, time.Now(), false)
	if err != nil {
		return err
	}
	err = runOutcome(cCtx, last, done, timeout)
	if done && last.State == verbGoal[name] {
		return nil // what was asked for: not an unsuccessful run's exit 3
	}
	return err
}

// verbErr gives a refused resume of a run that ended the hint that
// applies to it (run.resume names the run's state in its message).
func verbErr(name, id string, err error) error {
	if name != "resume" || !isCode(err, rpc.CodeIllegalTransition) {
		return err
	}
	for _, st := range domain.RunStates {
		if st.Done() && strings.Contains(err.Error(), "a "+string(st)+" run") {
			return failf(resumeHint(id, st), "%s", err.Error())
		}
	}
	return err
}

// resumeHint: resume continues an interrupted run only; for one that
// ended, name the commands that do apply.
func resumeHint(id string, st domain.RunState) string {
	switch st {
	case domain.RunFailed:
		return fmt.Sprintf("resume continues an interrupted run; to run a failed run's failed tasks again use `flowd run retry %s` (one task: --task KEY), "+
			"or start a new run that keeps the succeeded tasks with `flowd run replay %s --reuse-succeeded`", id, id)
	case domain.RunSucceeded:
		return fmt.Sprintf("resume continues an interrupted run; to run this one again use `flowd run replay %s`", id)
	}
	return fmt.Sprintf("resume continues an interrupted run; to run this one again use `flowd run replay %s` (--reuse-succeeded keeps its succeeded tasks)", id)
}
