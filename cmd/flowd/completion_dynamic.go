package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// Shell completion (--generate-bash-completion, which the scripts of
// `flowd completion` call): a group completes its subcommands (never the
// help alias h), a leaf its flags after "-", and the names a command
// takes — run ids, queues, schedules, definitions — from the cluster at
// --addr, as kubectl and nomad do. A cluster that does not answer within
// completionTimeout completes nothing.

const completionTimeout = 2 * time.Second

// What a name completes from.
const (
	compRuns        = "runs"
	compQueues      = "queues"
	compSchedules   = "schedules"
	compDefinitions = "definitions"
)

// completeArg: the kind of a command's first argument, by command path.
var completeArg = map[string]string{
	"run get": compRuns, "run wait": compRuns, "run watch": compRuns, "run cancel": compRuns,
	"run interrupt": compRuns, "run resume": compRuns, "run revert": compRuns, "run replay": compRuns,
	"run signal": compRuns, "run retry": compRuns, "task get": compRuns, "task logs": compRuns,
	"queue pause": compQueues, "queue resume": compQueues, "queue set": compQueues, "queue delete": compQueues,
	"schedule get": compSchedules, "schedule pause": compSchedules, "schedule resume": compSchedules,
	"schedule trigger": compSchedules, "schedule delete": compSchedules,
	"def get": compDefinitions,
}

// completeFlag: the kind of a flag's value, by flag name.
var completeFlag = map[string]string{
	"definition": compDefinitions, "schedule": compSchedules, "queue": compQueues,
}

// completer is the BashComplete of the command at path.
func completer(c *cli.Command, path []string) cli.BashCompleteFunc {
	return func(cCtx *cli.Context) {
		w := cCtx.App.Writer
		last := ""
		if n := len(os.Args); n > 2 {
			last = os.Args[n-2] // the word before --generate-bash-completion
		}
		if kind, ok := completeFlag[strings.TrimLeft(last, "-")]; ok && strings.HasPrefix(last, "--") && hasFlag(c, strings.TrimLeft(last, "-")) {
			printNames(w, serverNames(cCtx, kind))
			return
		}
		if strings.HasPrefix(last, "-") {
			printFlags(w, c.Flags)
			printFlags(w, cCtx.App.Flags) // global flags go anywhere
			return
		}
		// urfave/cli adds a help subcommand to every command it runs: a
		// leaf has no other.
		group := false
		for _, s := range c.Subcommands {
			if !s.Hidden && s.Name != "help" {
				fmt.Fprintln(w, s.Name)
				group = true
			}
		}
		if group {
			return
		}
		if kind, ok := completeArg[strings.Join(path, " ")]; ok && cCtx.NArg() == 0 {
			printNames(w, serverNames(cCtx, kind))
		}
	}
}

// appComplete completes the top level: its commands (not help / h), or
// the global flags after "-".
func appComplete(cCtx *cli.Context) {
	w := cCtx.App.Writer
	if n := len(os.Args); n > 2 && strings.HasPrefix(os.Args[n-2], "-") {
		printFlags(w, cCtx.App.Flags)
		return
	}
	for _, c := range cCtx.App.Commands {
		if !c.Hidden && c.Name != "help" {
			fmt.Fprintln(w, c.Name)
		}
	}
}

func printFlags(w io.Writer, flags []cli.Flag) {
	for _, f := range flags {
		for _, name := range f.Names() {
			if len(name) > 1 {
				fmt.Fprintln(w, "--"+name)
			}
		}
	}
}

func hasFlag(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func printNames(w io.Writer, names []string) {
	for _, n := range names {
		fmt.Fprintln(w, n)
	}
}

// serverNames lists the names of kind from the cluster (nil when it does
// not answer): run ids shortened as the CLI prints them.
func serverNames(cCtx *cli.Context, kind string) []string {
	c, err := newClient(cCtx)
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cCtx.Context, completionTimeout)
	defer cancel()
	var out []string
	switch kind {
	case compRuns:
		res, err := c.RunList(ctx, rpc.ListParams{Limit: 100})
		if err != nil {
			return nil
		}
		for _, r := range res.Runs {
			out = append(out, shortID(r.ID))
		}
	case compQueues:
		res, err := c.QueueList(ctx)
		if err != nil {
			return nil
		}
		for _, q := range res.Queues {
			out = append(out, q.Name)
		}
	case compSchedules:
		res, err := schedrpc.List(ctx, c)
		if err != nil {
			return nil
		}
		for _, s := range res.Schedules {
			out = append(out, s.ID)
		}
	case compDefinitions:
		res, err := defrpc.List(ctx, c)
		if err != nil {
			return nil
		}
		for _, d := range res.Definitions {
			out = append(out, d.Name)
		}
	}
	return out
}
