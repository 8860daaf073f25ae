package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, settingsCommand) }

var settingsCommand = &cli.Command{
	Name:  "settings",
	Usage: "show or change the cluster-wide settings",
	Subcommands: []*cli.Command{
		{Name: "get", Usage: "show the settings", Action: settingsGetAction},
		{
			Name:  "set",
			Usage: "change the given settings (the others keep their values)",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "max-running-runs", Usage: "at most `N` runs run at once; more wait (0 = unlimited)"},
				&cli.DurationFlag{Name: "retention", Usage: "finished runs are deleted after `DUR` (0 = default, 7 days)"},
				&cli.IntFlag{Name: "breaker-failures", Usage: "consecutive failures of a task type that open its breaker (0 = default 5, <0 disables)"},
				&cli.DurationFlag{Name: "breaker-cooldown", Usage: "an open breaker half-opens after `DUR` (0 = default 30s)"},
				&cli.IntFlag{Name: "event-window", Usage: "events retained (0 = default 100000)"},
				&cli.IntFlag{Name: "default-max-attempts", Usage: "max_attempts of tasks that set none, for runs submitted from now on (0 = default 1; 10 retries like Temporal or Asynq)"},
			},
			Action: settingsSetAction,
		},
	},
}

func settingsGetAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var s *rpc.Settings
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		s, err = c.SettingsGet(ctx)
		return err
	}); err != nil {
		return err
	}
	return printSettings(cCtx, s)
}

func settingsSetAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var in rpc.Settings
	n := 0
	if cCtx.IsSet("max-running-runs") {
		v := cCtx.Int("max-running-runs")
		if v < 0 {
			return usageErr(cCtx, "--max-running-runs %d: want 0 (unlimited) or more", v)
		}
		in.MaxRunningRuns, n = &v, n+1
	}
	if cCtx.IsSet("retention") {
		v := cCtx.Duration("retention").Milliseconds()
		if v < 0 {
			return usageErr(cCtx, "--retention must not be negative")
		}
		in.RetentionMS, n = &v, n+1
	}
	if cCtx.IsSet("breaker-failures") {
		v := cCtx.Int("breaker-failures")
		in.BreakerFailures, n = &v, n+1
	}
	if cCtx.IsSet("breaker-cooldown") {
		v := cCtx.Duration("breaker-cooldown").Milliseconds()
		if v < 0 {
			return usageErr(cCtx, "--breaker-cooldown must not be negative")
		}
		in.BreakerCooldownMS, n = &v, n+1
	}
	if cCtx.IsSet("event-window") {
		v := cCtx.Int("event-window")
		if v < 0 {
			return usageErr(cCtx, "--event-window must not be negative")
		}
		in.EventWindow, n = &v, n+1
	}
	if cCtx.IsSet("default-max-attempts") {
		v := cCtx.Int("default-max-attempts")
		if v < 0 {
			return usageErr(cCtx, "--default-max-attempts must not be negative")
		}
		in.DefaultMaxAttempts, n = &v, n+1
	}
	if n == 0 {
		return usageErr(cCtx, "nothing to set: give at least one of --max-running-runs, --retention, --breaker-failures, --breaker-cooldown, --event-window, --default-max-attempts")
	}
	var s *rpc.Settings
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		s, err = c.SettingsSet(ctx, in)
		return err
	}); err != nil {
		return err
	}
	return printSettings(cCtx, s)
}

func printSettings(cCtx *cli.Context, s *rpc.Settings) error {
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, s)
	}
	iv := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	dv := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	ms := func(v int64) string { return human(time.Duration(v) * time.Millisecond) }
	tw := newTable(w)
	mr := iv(s.MaxRunningRuns)
	if mr == 0 {
		row(tw, "max_running_runs", "0 (unlimited)")
	} else {
		row(tw, "max_running_runs", mr)
	}
	if r := dv(s.RetentionMS); r == 0 {
		row(tw, "retention", "0 (default "+ms(fsm.DefaultRetentionMS)+")")
	} else {
		row(tw, "retention", ms(r))
	}
	switch bf := iv(s.BreakerFailures); {
	case bf == 0:
		row(tw, "breaker_failures", fmt.Sprintf("0 (default %d)", fsm.DefaultBreakerFailures))
	case bf < 0:
		row(tw, "breaker_failures", fmt.Sprintf("%d (breakers disabled)", bf))
	default:
		row(tw, "breaker_failures", bf)
	}
	if c := dv(s.BreakerCooldownMS); c == 0 {
		row(tw, "breaker_cooldown", "0 (default "+ms(fsm.DefaultBreakerCooldownMS)+")")
	} else {
		row(tw, "breaker_cooldown", ms(c))
	}
	if e := iv(s.EventWindow); e == 0 {
		row(tw, "event_window", fmt.Sprintf("0 (default %d)", fsm.DefaultEventWindow))
	} else {
		row(tw, "event_window", e)
	}
	if m := iv(s.DefaultMaxAttempts); m == 0 {
		row(tw, "default_max_attempts", fmt.Sprintf("0 (default %d)", domain.DefaultMaxAttempts))
	} else {
		row(tw, "default_max_attempts", m)
	}
	return tw.Flush()
}
