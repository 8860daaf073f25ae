// Command flowd is the flowd workflow engine: the agent daemon and the
// command line client, in one binary. See `flowd --help`.
//
// Layout: one file per noun (cmd_run.go holds runCommand and its verbs),
// each appending its command to the package-level commands list in init();
// app.go builds the app from clones of those templates; common.go has the
// global flags, newClient, output and error helpers; glyphs.go the state
// glyphs (shared with the TUI).
//
// Decisions:
//
//   - Flags after arguments work: urfave/cli v2 stops at the first
//     positional argument, so reorderArgs moves later flags in front of
//     them, level by level, using each command's own flag definitions to
//     know which flags take a value. Global flags (--addr, --timeout,
//     --output, --no-color) given after a command move to the front unless
//     the command defines a flag of that name (submit/run wait --timeout is
//     kept as an alias of their --wait-timeout, worker run --timeout of its
//     --task-timeout; the help of those commands says so). "--" ends the
//     flags.
//   - "-n1" means "-n 1": the standard flag package that urfave/cli v2
//     parses with reads it as a flag named n1, so reorderArgs splits an
//     attached value off a one-letter flag that takes one (splitAttached).
//   - Short ids are the last 12 hex digits of a run's UUIDv7, its random
//     tail (the leading digits are a timestamp). Any unique part of an id
//     is accepted: the agents resolve it.
//   - Exit codes: 0 ok, 1 error, 2 usage error (and invalid agent
//     configuration), 3 a waited-for run ended failed, cancelled or
//     reverted, 4 the run was not done within --wait-timeout.
//   - Errors print "error: ..." and a "hint: ..." saying what to do next.
package main

import (
	"context"
	"os"
)

// Set at build time: go build -ldflags "-X main.version=v1.2.3 -X main.commit=abc1234"
// (GOFLAGS has -buildvcs=false here, so there is no VCS stamp to read).
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
}
