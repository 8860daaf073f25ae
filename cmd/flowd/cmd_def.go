package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
)

func init() { commands = append(commands, defCommand) }

var defCommand = &cli.Command{
	Name:    "def",
	Aliases: []string{"definition"},
	Usage:   "store named, versioned workflow definitions and list them",
	Description: "A definition is a workflow spec stored under its name with a version (1, 2, ...).\n" +
		"A version never changes. Run one with `flowd submit --definition NAME` (the latest\n" +
		"version) or `--definition NAME@VERSION`.",
	Subcommands: []*cli.Command{
		{
			Name:      "put",
			Usage:     "store the workflow in FILE as the next version of its definition",
			ArgsUsage: "FILE (- for stdin)",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "version", Usage: "store it as version `N` (refused if N holds another spec or is not the next one)"},
				&cli.StringFlag{Name: "name", Usage: "the definition's `NAME` (default: the workflow's name; they must agree)"},
				&cli.StringFlag{Name: "note", Usage: "a `TEXT` shown with this version"},
			},
			Action: defPutAction,
		},
		{Name: "list", Usage: "definitions with their latest version", Action: defListAction},
		{
			Name:      "get",
			Usage:     "a definition's spec (the latest version, or NAME@VERSION)",
			ArgsUsage: "NAME[@VERSION]",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "versions", Usage: "list every version too"},
			},
			Action: defGetAction,
		},
	},
}

func defPutAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "FILE"); err != nil {
		return err
	}
	p := defrpc.PutParams{Name: cCtx.String("name"), Version: cCtx.Int("version"), Note: cCtx.String("note")}
	if p.Version < 0 {
		return usageErr(cCtx, "--version %d: want 1 or more (or leave it out for the next one)", p.Version)
	}
	var err error
	if p.Workflow, err = specJSON(cCtx, cCtx.Args().First()); err != nil {
		return err
	}
	var res *defrpc.PutResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = defrpc.Put(ctx, c, p)
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, res)
	}
	if !res.Created {
		fmt.Fprintf(w, "unchanged: definition %s@%d already holds this spec\n", res.Name, res.Version)
		return nil
	}
	fmt.Fprintf(w, "definition %s@%d stored; run it with `flowd submit --definition %s`\n", res.Name, res.Version, res.Name)
	return nil
}

func defListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	res, err := fetch(cCtx, func(ctx context.Context, c *rpc.Client) (*defrpc.ListResult, error) { return defrpc.List(ctx, c) })
	if err != nil {
		return err
	}
	return printList(cCtx, res, len(res.Definitions), "no definitions yet; store one with `flowd def put FILE`", func(tw *tabwriter.Writer) {
		row(tw, "DEFINITION", "LATEST", "VERSIONS", "TASKS", "UPDATED", "NOTE")
		for _, d := range res.Definitions {
			row(tw, d.Name, d.Latest, d.Versions, d.Tasks, stamp(d.UpdatedAt), dash(d.Note))
		}
	})
}

func defGetAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "NAME[@VERSION]"); err != nil {
		return err
	}
	p := defrpc.GetParams{Name: cCtx.Args().First(), Versions: cCtx.Bool("versions")}
	var d *defrpc.Definition
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		d, err = defrpc.Get(ctx, c, p)
		return err
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, d)
	}
	tw := newTable(w)
	latest := ""
	if d.Version == d.Latest {
		latest = " (latest)"
	}
	row(tw, "definition", fmt.Sprintf("%s@%d%s", d.Name, d.Version, latest))
	row(tw, "latest", d.Latest)
	row(tw, "stored", stamp(d.CreatedAt))
	if d.Note != "" {
		row(tw, "note", d.Note)
	}
	row(tw, "tasks", d.Tasks)
	for _, v := range d.Versions {
		row(tw, "version", fmt.Sprintf("%d  %s  %d tasks  %s", v.Version, stamp(v.CreatedAt), v.Tasks, v.Note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "spec:")
	return printJSON(w, d.Spec)
}
