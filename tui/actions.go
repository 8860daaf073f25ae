package tui

import (
	"fmt"
	"slices"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/uuid"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Actions on runs and queues. Each key opens a confirm dialog (confirmMsg);
// the command that calls the cluster captures only values (client, ids).
// Under --readonly the bindings are disabled, so none of this is reachable.

// runVerb is one run action.
type runVerb struct {
	name   string   // "cancel"
	method string   // rpc method ("" for replay)
	edges  []string // run-machine edges that make it legal
	what   string   // what it does, for the dialog
}

var (
	verbCancel = runVerb{"cancel", rpc.MethodRunCancel,
		[]string{domain.EdgeCancel, domain.EdgeCancelBeforeStart, domain.EdgeCancelInterrupted},
		"Running tasks are abandoned (their leases are fenced off) and pending tasks never start."}
	verbInterrupt = runVerb{"interrupt", rpc.MethodRunInterrupt, []string{domain.EdgeInterrupt},
		"No new task starts; running tasks finish. Resume it later with r."}
	verbResume = runVerb{"resume", rpc.MethodRunResume, []string{domain.EdgeResume},
		"Tasks are dispatched again from where the run stopped."}
	verbRevert = runVerb{"revert", rpc.MethodRunRevert, []string{domain.EdgeRevert},
		"The revert handlers of completed tasks run, in reverse dependency order."}
	verbReplay = runVerb{"replay", "", nil,
		"A new run starts from this run's frozen spec and input."}
)

// verbFor maps a key to a run verb.
func verbFor(k *KeyMap, msg tea.KeyMsg) (runVerb, bool) {
	switch {
	case key.Matches(msg, k.Cancel):
		return verbCancel, true
	case key.Matches(msg, k.Interrupt):
		return verbInterrupt, true
	case key.Matches(msg, k.Resume):
		return verbResume, true
	case key.Matches(msg, k.Revert):
		return verbRevert, true
	case key.Matches(msg, k.Replay):
		return verbReplay, true
	}
	return runVerb{}, false
}

// allowed reports whether the verb can leave state (replay always can: the
// agent decides).
func (v runVerb) allowed(state domain.RunState) bool {
	if v.method == "" {
		return true
	}
	for _, e := range v.edges {
		if domain.RunMachine.Can(state, e) {
			return true
		}
	}
	return false
}

// confirmRun returns the message that asks to confirm verb on run (or
// says why it cannot apply).
func confirmRun(c Common, v runVerb, run rpc.Run) tea.Msg {
	if c.ReadOnly {
		return nil
	}
	if !v.allowed(run.State) {
		return errMsg{fmt.Errorf("cannot %s run %s: it is %s", v.name, shortID(run.ID), run.State)}
	}
	title := fmt.Sprintf("%s run %s?", capital(v.name), shortID(run.ID))
	body := fmt.Sprintf("run %s\nworkflow %s · state %s\n\n%s", run.ID, run.Workflow, stateLabel(string(run.State)), v.what)
	var yes tea.Cmd
	if v.method == "" {
		yes = replayCmd(c.Client, run.ID)
	} else {
		yes = verbCmd(c.Client, v, run.ID)
	}
	return confirmMsg{title: title, body: body, yes: yes}
}

func verbCmd(client Client, v runVerb, id string) tea.Cmd {
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.RunVerb(cx, v.method, id, "via flowd tui")
		if err != nil {
			return errMsg{fmt.Errorf("%s %s: %w", v.name, shortID(id), err)}
		}
		if !res.Changed {
			return toastMsg{fmt.Sprintf("run %s: %s changed nothing (already done)", shortID(id), v.name)}
		}
		return toastMsg{fmt.Sprintf("run %s: %s accepted (index %d)", shortID(id), v.name, res.Index)}
	}
}

func replayCmd(client Client, id string) tea.Cmd {
	newID := uuid.Must(uuid.NewV7()).String() // chosen here: a retried call cannot start two runs
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.RunReplay(cx, rpc.ReplayParams{ID: id, NewID: newID})
		if err != nil {
			return errMsg{fmt.Errorf("replay %s: %w", shortID(id), err)}
		}
		return toastMsg{fmt.Sprintf("run %s replayed as %s", shortID(id), shortID(res.ID))}
	}
}

// confirmQueuePause asks to pause (or resume) a queue globally.
func confirmQueuePause(c Common, q rpc.Queue) tea.Msg {
	if c.ReadOnly {
		return nil
	}
	pause := !q.Paused
	verb, what := "Pause", "Workers get no new task from it; running tasks finish."
	if !pause {
		verb, what = "Resume", "Its ready tasks are handed to workers again."
	}
	title := fmt.Sprintf("%s queue %s?", verb, q.Name)
	body := fmt.Sprintf("Queue %s: %d ready, %d running.\n%s", q.Name, q.Ready, q.Running, what)
	client, name := c.Client, q.Name
	yes := func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		if _, err := client.QueuePause(cx, name, "", pause); err != nil {
			return errMsg{fmt.Errorf("%s queue %s: %w", verb, name, err)}
		}
		return toastMsg{fmt.Sprintf("queue %s %sd", name, lower(verb))}
	}
	return confirmMsg{title: title, body: body, yes: yes}
}

// confirmRunQueuePause asks to pause (or resume) one queue for one run
// only: the run's tasks in it are held back, other runs are unaffected.
func confirmRunQueuePause(c Common, run rpc.Run, queue string) tea.Msg {
	if c.ReadOnly || queue == "" {
		return nil
	}
	pause := !slices.Contains(run.PausedQueues, queue)
	verb, what := "Pause", "Its tasks in this queue are not handed to workers until resumed; other runs are not affected."
	if !pause {
		verb, what = "Resume", "Its ready tasks in this queue are handed to workers again."
	}
	title := fmt.Sprintf("%s queue %s for run %s?", verb, queue, shortID(run.ID))
	body := fmt.Sprintf("run %s\nworkflow %s · state %s\n\n%s", run.ID, run.Workflow, stateLabel(string(run.State)), what)
	client, id := c.Client, run.ID
	yes := func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		if _, err := client.QueuePause(cx, queue, id, pause); err != nil {
			return errMsg{fmt.Errorf("%s queue %s for run %s: %w", lower(verb), queue, shortID(id), err)}
		}
		return toastMsg{fmt.Sprintf("queue %s %sd for run %s", queue, lower(verb), shortID(id))}
	}
	return confirmMsg{title: title, body: body, yes: yes}
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func lower(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'A'+'a') + s[1:]
}
