package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flowd/flowd/internal/display"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Shared flags, the client helper, output and error helpers.

// DefaultCallTimeout bounds each call to the cluster (--timeout).
const DefaultCallTimeout = 10 * time.Second

// connectTimeout bounds one connection (and TLS handshake) to an agent; the
// CLI dials its endpoints in parallel, so a dead one costs at most this.
const connectTimeout = time.Second

// devDir is where `flowd dev` puts its sockets by default:
// $TMPDIR/flowd-dev (or /tmp/flowd-dev).
func devDir() string { return filepath.Join(os.TempDir(), "flowd-dev") }

// devSockets are the sockets of the default `flowd dev` cluster.
func devSockets() []string {
	return []string{filepath.Join(devDir(), "n1.sock"), filepath.Join(devDir(), "n2.sock"), filepath.Join(devDir(), "n3.sock")}
}

func defaultAddr() string {
	var eps []string
	for _, s := range devSockets() {
		eps = append(eps, "unix://"+s)
	}
	return strings.Join(eps, ",")
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "addr", EnvVars: []string{"FLOWD_ADDR"}, Value: defaultAddr(),
			Usage: "comma-separated agent endpoints (unix:///path, /path, tcp://host:port, or tls://host:port for a TLS client listener); calls fail over between them. They are dialled in parallel (1s connect timeout): the CLI says at once when no agent listens at any, when TLS fails, or when the agents that answer have no quorum (k of n reachable)"},
		&cli.DurationFlag{Name: "timeout", EnvVars: []string{"FLOWD_TIMEOUT"}, Value: DefaultCallTimeout,
			Usage: "deadline of each call to the cluster (how long to wait for a run is --wait-timeout of submit, run wait and run replay)"},
		&cli.StringFlag{Name: "route", EnvVars: []string{"FLOWD_ROUTE"}, Value: rpc.RouteLeader,
			Usage: "where writes go: leader (straight to the leader's endpoint when it is in --addr) or any (the connected agent, which forwards them)"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, EnvVars: []string{"FLOWD_OUTPUT"}, Value: "table",
			Usage: "output format: table or json"},
		&cli.BoolFlag{Name: "no-color", EnvVars: []string{"FLOWD_NO_COLOR"},
			Usage: "no colour in output (NO_COLOR is respected too)"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"FLOWD_TOKEN"},
			Usage: "ACL token `SECRET` for a tcp:// or tls:// endpoint (from flowd acl token create; prefer FLOWD_TOKEN: a flag shows in ps); the Unix socket needs none"},
		&cli.StringFlag{Name: "ca-cert", EnvVars: []string{"FLOWD_CACERT"},
			Usage: "cluster CA certificate `FILE` (the ca.pem of flowd tls ca create) that a tls:// endpoint's agent must be signed by"},
	}
}

func checkGlobalFlags(cCtx *cli.Context) error {
	switch o := cCtx.String("output"); o {
	case "table", "json":
	default:
		return usageErr(cCtx, "--output %q: want table or json", o)
	}
	if cCtx.Duration("timeout") <= 0 {
		return usageErr(cCtx, "--timeout must be positive")
	}
	switch r := cCtx.String("route"); r {
	case rpc.RouteLeader, rpc.RouteAny:
	default:
		return usageErr(cCtx, "--route %q: want leader or any", r)
	}
	return nil
}

// route is --route.
func route(cCtx *cli.Context) string { return rootCtx(cCtx).String("route") }

// rootCtx is the app's own context, where the global flags live (a command
// may define a flag of the same name, e.g. `run wait --timeout`, the alias
// of its --wait-timeout).
func rootCtx(cCtx *cli.Context) *cli.Context {
	l := cCtx.Lineage()
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].Command != nil {
			return l[i]
		}
	}
	return cCtx
}

func callTimeout(cCtx *cli.Context) time.Duration {
	if d := rootCtx(cCtx).Duration("timeout"); d > 0 {
		return d
	}
	return DefaultCallTimeout
}

func jsonOut(cCtx *cli.Context) bool { return rootCtx(cCtx).String("output") == "json" }

// endpoints splits --addr.
func endpoints(cCtx *cli.Context) []string {
	var out []string
	for _, e := range strings.Split(rootCtx(cCtx).String("addr"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

var discardLogger = slog.New(slog.DiscardHandler)

// newClient returns a failover client for --addr, leader-aware per
// --route; tweak may set hooks (OnConnect) before it connects. It connects
// on the first call.
func newClient(cCtx *cli.Context, tweak ...func(*rpc.ClientOptions)) (*rpc.Client, error) {
	eps := endpoints(cCtx)
	if len(eps) == 0 {
		return nil, usageErr(cCtx, "--addr is empty: give at least one agent endpoint")
	}
	// FailFast: the CLI answers at once when no agent listens, a TLS
	// handshake fails, or the reachable agents have no quorum (rpc/reach.go)
	// rather than at --timeout.
	opts := rpc.ClientOptions{Logger: discardLogger, DialTimeout: min(connectTimeout, callTimeout(cCtx)), Route: route(cCtx), FailFast: true}
	var err error
	if opts.Token, opts.TLS, err = clientAuth(cCtx); err != nil {
		return nil, err
	}
	for _, t := range tweak {
		t(&opts)
	}
	c, err := rpc.NewClient(eps, opts)
	if err != nil {
		return nil, usageErr(cCtx, "--addr: %v", err)
	}
	return c, nil
}

// callCtx bounds one call by --timeout.
func callCtx(cCtx *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cCtx.Context, callTimeout(cCtx))
}

// withClient runs fn with a client and a --timeout context.
func withClient(cCtx *cli.Context, fn func(ctx context.Context, c *rpc.Client) error) error {
	c, err := newClient(cCtx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := callCtx(cCtx)
	defer cancel()
	return fn(ctx, c)
}

// printJSON writes v indented, with a trailing newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// fetch makes one call against the cluster (through withClient) and
// returns its answer.
func fetch[R any](cCtx *cli.Context, call func(context.Context, *rpc.Client) (R, error)) (R, error) {
	var res R
	err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) (err error) {
		res, err = call(ctx, c)
		return err
	})
	return res, err
}

// printList prints a list answer: res as JSON with --output json, else
// emptyHint when the list has no items (n), else the table table writes.
func printList(cCtx *cli.Context, res any, n int, emptyHint string, table func(tw *tabwriter.Writer)) error {
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		return printJSON(w, res)
	}
	if n == 0 {
		fmt.Fprintln(w, emptyHint)
		return nil
	}
	tw := newTable(w)
	table(tw)
	return tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes tab-separated cells.
func row(tw io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	fmt.Fprintln(tw)
}

// --- errors and exit codes ---

// cliError carries an exit code, a message and a hint. silent errors were
// already reported by the command (e.g. a run that ended failed).
type cliError struct {
	code   int
	msg    string
	hint   string
	silent bool
}

func (e *cliError) Error() string { return e.msg }

// usageErr is a usage error (exit 2) pointing at the command's help.
func usageErr(cCtx *cli.Context, format string, args ...any) error {
	help := "flowd --help"
	if cCtx != nil && cCtx.Command != nil && cCtx.Command.HelpName != "" && len(cCtx.Lineage()) > 2 {
		help = cCtx.Command.HelpName + " --help"
	}
	return &cliError{code: exitUsage, msg: fmt.Sprintf(format, args...), hint: "see `" + help + "`"}
}

// exitWith ends with code without printing anything more.
func exitWith(code int) error { return &cliError{code: code, silent: true} }

// failf is an error (exit 1) with a hint.
func failf(hint, format string, args ...any) error {
	return &cliError{code: exitError, msg: fmt.Sprintf(format, args...), hint: hint}
}

// report prints err (if any) as "error: ..." plus a hint and returns the
// exit code.
func report(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	if ce, ok := errors.AsType[*cliError](err); ok {
		if !ce.silent {
			fmt.Fprintf(w, "error: %s\n", ce.msg)
			if ce.hint != "" {
				fmt.Fprintf(w, "hint: %s\n", ce.hint)
			}
		}
		return ce.code
	}
	if ec, ok := errors.AsType[cli.ExitCoder](err); ok && ec.ExitCode() != 0 {
		if msg := ec.Error(); msg != "" {
			fmt.Fprintf(w, "error: %s\n", msg)
		}
		return ec.ExitCode()
	}
	if se, ok := errors.AsType[*domain.SpecError](err); ok && len(se.Problems) > 0 {
		fmt.Fprintf(w, "error: invalid workflow spec: %d problem(s)\n", len(se.Problems))
		for _, p := range se.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		fmt.Fprintln(w, "hint: check the file offline with `flowd validate FILE`")
		return exitError
	}
	_, isRPC := errors.AsType[*rpc.Error](err)
	_, isReach := errors.AsType[*rpc.ReachError](err) // its causes may be dial timeouts: not --timeout
	if !isRPC && !isReach && errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(w, "error: no answer within --timeout: %s\n", err)
	} else {
		fmt.Fprintf(w, "error: %s\n", err)
	}
	if h := hintFor(err); h != "" {
		fmt.Fprintf(w, "hint: %s\n", h)
	}
	return exitError
}

// hintFor says what to do next for the common failures.
func hintFor(err error) string {
	if pe, ok := errors.AsType[*rpc.Error](err); ok {
		switch pe.Code {
		case rpc.CodeUnavailable:
			return "the cluster has no leader or is unreachable: check `flowd health`, and start the other agents (3 nodes need 2 up)"
		case rpc.CodeNotFound:
			switch {
			case strings.Contains(pe.Message, "`flowd "):
				return "" // the agent already said what to run
			case strings.Contains(pe.Message, "task"):
				return "see the run's tasks with `flowd run get RUN` (task ids are RUN/KEY)"
			}
			return "check the id with `flowd run list` (ids may be shortened to any unique part)"
		case rpc.CodeIllegalTransition:
			return "see the run's state with `flowd run get ID`"
		case rpc.CodeTooManyRuns:
			return "the concurrent-run cap is reached: submit with --if-full queue, or raise it with `flowd settings set --max-running-runs N`"
		case rpc.CodeTooLarge:
			return "make the request smaller, or raise --max-line on the agents"
		case rpc.CodeMethodNotFound:
			return "the agent may be older than this client: compare `flowd version` with `flowd health`"
		}
		return ""
	}
	if re, ok := errors.AsType[*rpc.ReachError](err); ok {
		switch {
		case errors.Is(re.Kind, rpc.ErrNoQuorum):
			return "reads still answer from one agent's local state (`flowd run list`, `flowd run get` say so); `flowd health` shows who is up"
		case errors.Is(re.Kind, rpc.ErrTLS):
			return "" // the message names the TLS problem and its fix
		}
		return "start the agents (a local cluster: `flowd dev`), or point --addr / FLOWD_ADDR at running ones"
	}
	if errors.Is(err, rpc.ErrTLS) {
		return "" // the message names the TLS problem and its fix
	}
	if _, ok := errors.AsType[*rpc.ConnError](err); ok {
		return "is an agent running? start a local cluster with `flowd dev`, or point --addr / FLOWD_ADDR at one"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the cluster may have no leader, or no agent may listen at --addr / FLOWD_ADDR: check `flowd health` (a local cluster: `flowd dev`)"
	}
	if errors.Is(err, domain.ErrUnavailable) {
		return "check `flowd health`"
	}
	return ""
}

// needArgs checks the number of positional arguments.
func needArgs(cCtx *cli.Context, min, max int, usage string) error {
	n := cCtx.NArg()
	if n < min || (max >= 0 && n > max) {
		if n < min {
			return usageErr(cCtx, "missing argument: %s", usage)
		}
		return usageErr(cCtx, "too many arguments %q: want %s", cCtx.Args().Slice()[max:], usage)
	}
	return nil
}

// --- ids ---

// ShortIDLen is the length of a short run id (display.ShortIDLen): the
// random tail of a UUIDv7. Any unique part of an id is accepted as input.
const ShortIDLen = display.ShortIDLen

// shortID is a run's short id (see display.ShortID).
var shortID = display.ShortID

// human formats a duration compactly (see display.Human).
var human = display.Human

// span is the duration between two times; an unfinished span runs to now.
func span(from, to time.Time) string { return display.Span(time.Now(), from, to) }

// dash shows an empty value as "-".
var dash = display.Dash

// ago is a relative age ("3m12s ago"), "-" for the zero time.
func ago(t time.Time) string { return display.Ago(time.Now(), t) }

// shortTaskID is "<short run>/<key>".
func shortTaskID(runID, key string) string { return shortID(runID) + "/" + key }

// --- input ---

// readFileArg reads a file argument; "-" is stdin.
func readFileArg(cCtx *cli.Context, path string) ([]byte, error) {
	if path == "-" {
		r := cCtx.App.Reader
		if r == nil {
			r = os.Stdin
		}
		return io.ReadAll(r)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, failf("", "%v", err)
	}
	return b, nil
}

// jsonArg parses a JSON value given inline or as @file (@- for stdin; a
// .yaml/.yml file is converted).
func jsonArg(cCtx *cli.Context, name, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	if file, ok := strings.CutPrefix(v, "@"); ok {
		b, err := readFileArg(cCtx, file)
		if err != nil {
			return nil, err
		}
		if ext := strings.ToLower(filepath.Ext(file)); ext == ".yaml" || ext == ".yml" {
			js, err := toJSON(b)
			if err != nil {
				return nil, usageErr(cCtx, "%s %s: %v", name, file, err)
			}
			return js, nil
		}
		t := strings.TrimSpace(string(b))
		if !json.Valid([]byte(t)) {
			return nil, usageErr(cCtx, "%s: %s does not hold valid JSON", name, file)
		}
		return json.RawMessage(t), nil
	}
	if !json.Valid([]byte(v)) {
		return nil, usageErr(cCtx, "%s %q is not valid JSON (strings need quotes: '\"text\"'; or use @file)", name, v)
	}
	return json.RawMessage(v), nil
}

// --- time ---

// stamp is a short RFC 3339 time in UTC with its age.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z") + " (" + ago(t) + ")"
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
