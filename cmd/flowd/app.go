package main

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
)

// commands is the command tree's top level. Every cmd_*.go file appends its
// noun in init(); newApp clones and sorts them, so a file added later (dev,
// worker, bench, tui) only needs
//
//	func init() { commands = append(commands, devCommand) }
//
// The package-level commands are templates: newApp copies every command and
// flag (urfave/cli mutates both while running), so one process may build
// and run the app many times (the in-process tests do).
var commands []*cli.Command

// Exit codes of every command.
const (
	exitOK       = 0
	exitError    = 1 // an error (printed as "error: ...")
	exitUsage    = 2 // bad flags or arguments, invalid agent configuration
	exitRunUnsuc = 3 // the run ended failed, cancelled or reverted
	exitTimeout  = 4 // the run did not finish within --wait-timeout
	exitDegraded = 5 // flowd health: a quorum holds but agents of --addr are down
)

// newApp builds the flowd command line. Output goes to App.Writer and
// App.ErrWriter (never os.Stdout), input comes from App.Reader.
func newApp() *cli.App {
	app := &cli.App{
		Name:                 "flowd",
		Usage:                "a workflow engine with a highly available task queue",
		Version:              version,
		Flags:                globalFlags(),
		EnableBashCompletion: true,
		Metadata:             map[string]any{},
		// Never os.Exit inside the app: run maps errors to exit codes.
		ExitErrHandler: func(*cli.Context, error) {},
		Before:         checkGlobalFlags,
		OnUsageError:   onUsageError,
		CommandNotFound: func(cCtx *cli.Context, name string) {
			cCtx.App.Metadata[metaUsageErr] = usageErr(cCtx, "unknown command %q", name)
		},
		Description: "Start a local cluster with `flowd dev`, or three `flowd agent` daemons; then\n" +
			"`flowd submit wf.yaml --wait`. Flags may follow arguments (`flowd run get ID --output json`).\n" +
			"Every flag also reads an environment variable (shown as [$FLOWD_...]).\n\n" +
			"Exit codes: 0 ok, 1 error, 2 usage error, 3 run ended failed/cancelled/reverted,\n" +
			"4 timed out waiting for a run.",
	}
	app.Action = groupAction
	app.BashComplete = appComplete
	cmds := make([]*cli.Command, 0, len(commands))
	for _, c := range commands {
		cmds = append(cmds, cloneCommand(c))
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	for _, c := range cmds {
		prepareCommand(c, []string{c.Name}, app.Flags)
	}
	app.Commands = cmds
	cli.VersionPrinter = func(cCtx *cli.Context) {
		fmt.Fprintf(cCtx.App.Writer, "flowd %s (commit %s)\n", version, commit)
	}
	return app
}

const metaUsageErr = "flowd.usage-error"

// run executes the app with args (args[0] is the program name) and returns
// the process exit code; errors are printed to stderr with a hint.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp()
	app.Reader, app.Writer, app.ErrWriter = stdin, stdout, stderr
	if len(args) == 0 {
		args = []string{"flowd"}
	}
	args = append(args[:1:1], reorderArgs(app, args[1:])...)
	err := app.RunContext(ctx, args)
	if err == nil {
		if ue, ok := app.Metadata[metaUsageErr].(error); ok {
			err = ue
		}
	}
	return report(stderr, err)
}

// cloneCommand deep-copies a command template: the command, its flags and
// its subcommands (shallow copies of each flag struct).
func cloneCommand(c *cli.Command) *cli.Command {
	cp := *c
	cp.Flags = make([]cli.Flag, len(c.Flags))
	for i, f := range c.Flags {
		cp.Flags[i] = cloneFlag(f)
	}
	cp.Subcommands = make([]*cli.Command, len(c.Subcommands))
	for i, s := range c.Subcommands {
		cp.Subcommands[i] = cloneCommand(s)
	}
	return &cp
}

func cloneFlag(f cli.Flag) cli.Flag {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return f
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	return cp.Interface().(cli.Flag)
}

// prepareCommand gives every flag of the tree a FLOWD_* environment variable
// (FLOWD_<COMMAND PATH>_<FLAG> unless the flag names its own), our usage
// error handler, an action for group commands, and the global options in
// the help of leaf commands.
func prepareCommand(c *cli.Command, path []string, globals []cli.Flag) {
	for _, f := range c.Flags {
		setDefaultEnv(f, "FLOWD_"+envName(strings.Join(append(append([]string(nil), path...), f.Names()[0]), "_")))
	}
	if c.OnUsageError == nil {
		c.OnUsageError = onUsageError
	}
	if c.BashComplete == nil {
		c.BashComplete = completer(c, path)
	}
	if len(c.Subcommands) > 0 {
		if c.Action == nil {
			c.Action = groupAction
		}
		for _, s := range c.Subcommands {
			prepareCommand(s, append(path, s.Name), globals)
		}
		return
	}
	if c.CustomHelpTemplate == "" {
		c.CustomHelpTemplate = cli.CommandHelpTemplate + renderGlobalHelp(globals, levelFlags(c.Flags, false))
	}
	enforceRequired(c)
}

// enforceRequired checks required flags in the action instead of letting
// urfave/cli do it, so a missing one is a usage error (exit 2) like every
// other.
func enforceRequired(c *cli.Command) {
	var required []string
	for _, f := range c.Flags {
		rf, ok := f.(cli.RequiredFlag)
		if !ok || !rf.IsRequired() {
			continue
		}
		if field := reflect.ValueOf(f).Elem().FieldByName("Required"); field.IsValid() && field.CanSet() {
			field.SetBool(false)
			required = append(required, f.Names()[0])
		}
	}
	if len(required) == 0 || c.Action == nil {
		return
	}
	action := c.Action
	c.Action = func(cCtx *cli.Context) error {
		var missing []string
		for _, n := range required {
			if !cCtx.IsSet(n) {
				missing = append(missing, "--"+n)
			}
		}
		if len(missing) > 0 {
			return usageErr(cCtx, "required flag(s) not set: %s", strings.Join(missing, ", "))
		}
		return action(cCtx)
	}
}

func envName(s string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", " ", "_", ".", "_").Replace(s))
}

func setDefaultEnv(f cli.Flag, env string) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer {
		return
	}
	field := v.Elem().FieldByName("EnvVars")
	if !field.IsValid() || field.Kind() != reflect.Slice || field.Len() > 0 || !field.CanSet() {
		return
	}
	field.Set(reflect.ValueOf([]string{env}))
}

// renderGlobalHelp lists the global flags for the help of a leaf command
// (they are accepted anywhere on the command line). A global flag the
// command redefines (submit's --timeout, an alias of its --wait-timeout)
// says where it must go, so one help screen never shows two flags of one
// name without telling which is which.
func renderGlobalHelp(flags []cli.Flag, own map[string]cli.Flag) string {
	var names, usages []string
	width := 0
	for _, f := range flags {
		name, usage, _ := strings.Cut(fmt.Sprint(f), "\t")
		if _, shadowed := own[f.Names()[0]]; shadowed {
			usage += fmt.Sprintf(" (give it before the command: after it, --%s is this command's own flag, above)", f.Names()[0])
		}
		names, usages = append(names, name), append(usages, usage)
		width = max(width, len(name))
	}
	var b strings.Builder
	b.WriteString("\nGLOBAL OPTIONS (may also follow the command, unless it has a flag of that name):\n")
	for i := range names {
		b.WriteString(fmt.Sprintf("   %-*s  %s\n", width, names[i], usages[i]))
	}
	// The help is a text/template: keep braces in flag texts literal.
	return strings.NewReplacer("{{", "{{`{{`}}", "}}", "{{`}}`}}").Replace(b.String())
}

// groupAction runs for the app itself and for commands that only group
// subcommands: with no argument it shows help, with an unknown one it is a
// usage error (urfave/cli would exit 3 with "No help topic").
func groupAction(cCtx *cli.Context) error {
	if cCtx.Args().Present() {
		return usageErr(cCtx, "unknown command %q", cCtx.Args().First())
	}
	if len(cCtx.Lineage()) <= 2 { // the app itself (and urfave's empty parent)
		return cli.ShowAppHelp(cCtx)
	}
	return cli.ShowSubcommandHelp(cCtx)
}

func onUsageError(cCtx *cli.Context, err error, _ bool) error {
	return usageErr(cCtx, "%v", err)
}

// reorderArgs moves flags that follow positional arguments in front of
// them, level by level (urfave/cli v2 stops parsing flags at the first
// positional argument and would silently treat the rest as arguments).
// Each level's own flag definitions say which flags take a value; a global
// flag given at a deeper level (and not redefined there) moves to the front
// of the whole command line. "--" ends the flags: everything after it stays
// an argument. A trailing --generate-bash-completion stays last.
func reorderArgs(app *cli.App, args []string) []string {
	const completion = "--generate-bash-completion"
	tail := []string(nil)
	if n := len(args); n > 0 && args[n-1] == completion {
		args, tail = args[:n-1], []string{completion}
	}
	var hoisted []string
	root := levelFlags(app.Flags, true)
	out := reorderLevel(args, root, nil, app.Commands, &hoisted, true)
	// Global flags found deeper go right after the root's own flags; a
	// later occurrence wins, as it would have in place.
	i := 0
	for i < len(out) && isFlagToken(out[i]) && out[i] != "--" {
		name, hasValue := flagName(out[i])
		i++
		if f, ok := root[name]; ok && takesValue(f) && !hasValue && i < len(out) {
			i++
		}
	}
	res := append(append(append([]string(nil), out[:i]...), hoisted...), out[i:]...)
	return append(res, tail...)
}

// levelFlags indexes flags by every name; the help (and, for the app,
// version) flags are added since urfave/cli appends them later.
func levelFlags(flags []cli.Flag, root bool) map[string]cli.Flag {
	m := map[string]cli.Flag{}
	extra := []cli.Flag{cli.HelpFlag}
	if root {
		extra = append(extra, cli.VersionFlag)
	}
	for _, f := range append(append([]cli.Flag(nil), flags...), extra...) {
		if f == nil {
			continue
		}
		for _, n := range f.Names() {
			m[n] = f
		}
	}
	return m
}

func reorderLevel(args []string, own, globals map[string]cli.Flag, subs []*cli.Command, hoisted *[]string, root bool) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// Flags first, then the end marker, then every argument.
			return append(append(append(flags, "--"), positional...), args[i+1:]...)
		}
		if isFlagToken(a) {
			if v, ok := splitAttached(a, own, globals); ok {
				args = append(append(append([]string(nil), args[:i]...), v...), args[i+1:]...)
				a = args[i]
			}
			name, hasValue := flagName(a)
			f, mine := own[name]
			if !mine && globals != nil {
				if g, ok := globals[name]; ok {
					*hoisted = append(*hoisted, a)
					if takesValue(g) && !hasValue && i+1 < len(args) {
						*hoisted = append(*hoisted, args[i+1])
						i++
					}
					continue
				}
			}
			flags = append(flags, a)
			if mine && takesValue(f) && !hasValue && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		if len(positional) == 0 {
			if sub := findCommand(subs, a); sub != nil {
				g := globals
				if root {
					g = own
				}
				rest := reorderLevel(args[i+1:], levelFlags(sub.Flags, false), g, sub.Subcommands, hoisted, false)
				return append(append(flags, a), rest...)
			}
		}
		positional = append(positional, a)
	}
	return append(flags, positional...)
}

// splitAttached turns "-n1" into "-n", "1" when -n is a one-letter flag of
// this level (or a global one) that takes a value and "n1" names no flag:
// urfave/cli v2 parses flags with the standard flag package, which reads
// "-n1" as a flag called n1 and rejects it, while getopt-style tools (head
// -n1, tail -n1) taught everyone to write it.
func splitAttached(a string, own, globals map[string]cli.Flag) ([]string, bool) {
	if len(a) < 3 || a[0] != '-' || a[1] == '-' || strings.IndexByte(a, '=') >= 0 {
		return nil, false
	}
	name := a[1:]
	if _, ok := own[name]; ok {
		return nil, false
	}
	if _, ok := globals[name]; ok {
		return nil, false
	}
	f, ok := own[name[:1]]
	if !ok {
		f, ok = globals[name[:1]]
	}
	if !ok || !takesValue(f) {
		return nil, false
	}
	return []string{a[:2], a[2:]}, true
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// isFlagToken: "-x", "--xy", "--xy=v"; not "-" (stdin) and not a negative
// number.
func isFlagToken(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	if a == "--" {
		return true
	}
	c := a[1]
	if c >= '0' && c <= '9' {
		return false
	}
	return true
}

func flagName(a string) (name string, hasValue bool) {
	name = strings.TrimLeft(a, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true
	}
	return name, false
}

func takesValue(f cli.Flag) bool {
	if tv, ok := f.(interface{ TakesValue() bool }); ok {
		return tv.TakesValue()
	}
	return true
}
