package main

import (
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"
)

func init() { commands = append(commands, versionCommand) }

var versionCommand = &cli.Command{
	Name:   "version",
	Usage:  "print the version and commit of this binary",
	Action: versionAction,
}

func versionAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	v := map[string]string{"version": version, "commit": commit, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, v)
	}
	_, err := fmt.Fprintf(cCtx.App.Writer, "flowd %s\ncommit %s\n%s %s\n", version, commit, v["go"], v["platform"])
	return err
}
