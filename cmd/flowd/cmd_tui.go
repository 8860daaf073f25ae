package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/tui"
)

func init() { commands = append(commands, tuiCommand) }

var tuiCommand = &cli.Command{
	Name:  "tui",
	Usage: "watch and steer runs live in a terminal UI",
	Description: `A live view of the cluster, driven by the event stream (no polling): runs by
state, a run's tasks, graph, timeline and JSON, task attempts and leases,
queues, workers, cluster health, the raw event stream and schedules. Keys:
1-8 switch screens, enter opens, esc goes back, / filters, : runs a command
(:run ID, :queues, ...), ? lists every key of the current screen, q goes
back or quits.

Actions (cancel, interrupt, resume, revert, replay, queue pause/resume,
schedule pause/resume/trigger/delete) ask for confirmation or act at once; --readonly hides them all. When the connected agent dies
the TUI keeps the last data on screen, greyed, counts down and reconnects to
the next endpoint of --addr.`,
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "readonly", EnvVars: []string{"FLOWD_TUI_READONLY"},
			Usage: "hide every action (cancel, interrupt, resume, revert, replay, pause)"},
		&cli.BoolFlag{Name: "ascii", EnvVars: []string{"FLOWD_TUI_ASCII"},
			Usage: "no colour and ASCII line art (the › cursor and state glyphs stay)"},
	},
	Action: tuiAction,
}

func tuiAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	eps := endpoints(cCtx)
	if len(eps) == 0 {
		return usageErr(cCtx, "--addr is empty: give at least one agent endpoint")
	}
	token, tlsCfg, err := clientAuth(cCtx)
	if err != nil {
		return err
	}
	opts := tui.Options{
		Auth:      tui.Auth{Token: token, TLS: tlsCfg},
		Endpoints: eps,
		Route:     route(cCtx),
		ReadOnly:  cCtx.Bool("readonly"),
		ASCII:     cCtx.Bool("ascii"),
		NoColor:   rootCtx(cCtx).Bool("no-color") || os.Getenv("NO_COLOR") != "",
		Output:    cCtx.App.Writer,
		Logger:    discardLogger,
	}
	if r := cCtx.App.Reader; r != nil && r != os.Stdin {
		opts.Input = r // tests; on a terminal bubbletea reads stdin (or /dev/tty)
	}
	if err := tui.Run(cCtx.Context, opts); err != nil {
		return failf("", "tui: %v", err)
	}
	return nil
}
