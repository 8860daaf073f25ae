package tui

import (
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/fsm/domain"
)

// The `:` command line (k9s style): `:runs failed`, `:run ID`,
// `:task RUN/KEY`, `:queues`, `:cancel ID`, ... Commands are parsed into
// the same messages the keys produce; any unique prefix of a command name
// works, and tab completes it.

// Messages of the command line.

// openScreenMsg switches to a top-level screen; arg is the screen's
// argument (a state tab for runs, a filter for events).
type openScreenMsg struct {
	screen screenID
	arg    string
}

// freezeMsg freezes (true) or unfreezes live updates.
type freezeMsg struct{ on bool }

// showHelpMsg opens the help overlay.
type showHelpMsg struct{}

var commandNames = []string{"runs", "run", "task", "queues", "workers", "cluster", "events", "schedules", "dead",
	"cancel", "interrupt", "resume", "revert", "replay", "submit", "freeze", "live", "help", "quit"}

// completeCommand completes the first word to the command it uniquely
// starts (used on tab).
func completeCommand(s string) string {
	word, rest, _ := strings.Cut(s, " ")
	if rest != "" {
		return s
	}
	var hits []string
	for _, n := range commandNames {
		if strings.HasPrefix(n, word) {
			hits = append(hits, n)
		}
	}
	if len(hits) == 1 {
		return hits[0] + " "
	}
	return s
}

// resolveCommand maps a typed name to a command: exact, alias, or unique
// prefix.
func resolveCommand(name string) (string, error) {
	aliases := map[string]string{"q": "quit", "exit": "quit", "ev": "events", "wk": "workers", "qs": "queues", "sc": "schedules", "failed": "dead", "dlq": "dead", "?": "help"}
	if a, ok := aliases[name]; ok {
		return a, nil
	}
	if slices.Contains(commandNames, name) {
		return name, nil
	}
	var hits []string
	for _, n := range commandNames {
		if strings.HasPrefix(n, name) {
			hits = append(hits, n)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return "", fmt.Errorf("unknown command %q (try :help)", name)
	}
	return "", fmt.Errorf("command %q is ambiguous: %s", name, strings.Join(hits, ", "))
}

// runCommand turns a command line into a command.
func runCommand(c Common, line string) tea.Cmd {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	name, err := resolveCommand(fields[0])
	if err != nil {
		return errorCmd(err)
	}
	arg := strings.Join(fields[1:], " ")
	msg := func(m tea.Msg) tea.Cmd { return func() tea.Msg { return m } }
	need := func(what string) tea.Cmd { return errorCmd(fmt.Errorf(":%s needs %s", name, what)) }
	switch name {
	case "runs":
		if arg != "" && arg != "all" && !domain.RunState(arg).Valid() {
			return errorCmd(fmt.Errorf(":runs %s: not a run state", arg))
		}
		return msg(openScreenMsg{screen: scrRuns, arg: arg})
	case "run":
		if arg == "" {
			return msg(openScreenMsg{screen: scrRun})
		}
		return msg(openRunMsg{id: arg})
	case "task":
		run, key, ok := strings.Cut(arg, "/")
		if arg == "" {
			return msg(openScreenMsg{screen: scrTask})
		}
		if !ok || run == "" || key == "" {
			return need("RUN/KEY")
		}
		return msg(openTaskMsg{runID: run, key: key})
	case "queues":
		return msg(openScreenMsg{screen: scrQueues})
	case "workers":
		return msg(openScreenMsg{screen: scrWorkers})
	case "cluster":
		return msg(openScreenMsg{screen: scrCluster})
	case "events":
		return msg(openScreenMsg{screen: scrEvents, arg: arg})
	case "schedules":
		return msg(openScreenMsg{screen: scrSchedules})
	case "dead":
		return msg(openScreenMsg{screen: scrDead})
	case "freeze", "live":
		return msg(freezeMsg{on: name == "freeze"})
	case "help":
		return msg(showHelpMsg{})
	case "quit":
		return tea.Quit
	}
	// Run verbs: fetch the run (the id may be short), then confirm.
	if c.ReadOnly {
		return errorCmd(fmt.Errorf(":%s: read-only mode", name))
	}
	if name == "submit" {
		path, rest, _ := strings.Cut(arg, " ")
		if path == "" {
			return need("a workflow file (and an optional JSON input)")
		}
		input, err := parseInput(name, rest)
		if err != nil {
			return errorCmd(err)
		}
		return submitFile(c, path, input, strings.TrimSpace(rest) == "")
	}
	if arg == "" {
		return need("a run id")
	}
	if id, rest, ok := strings.Cut(arg, " "); ok && name == "replay" {
		input, err := parseInput(name, rest)
		if err != nil {
			return errorCmd(err)
		}
		if input != nil {
			return replayWithInput(c, id, input)
		}
		arg = id
	}
	v := map[string]runVerb{"cancel": verbCancel, "interrupt": verbInterrupt, "resume": verbResume,
		"revert": verbRevert, "replay": verbReplay}[name]
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		r, err := c.Client.RunGet(cx, arg)
		if err != nil {
			return errMsg{fmt.Errorf(":%s %s: %w", name, arg, err)}
		}
		return confirmRun(c, v, *r)
	}
}
