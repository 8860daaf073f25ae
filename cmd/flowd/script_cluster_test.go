package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// The commands below let a script drive the client against a live
// cluster. Each script that needs one starts its own (`cluster`), so every
// script runs alone:
//
//	cluster                  three in-process agents; sets FLOWD_ADDR and
//	                         AGENTS (their data directories' parent)
//	worker TYPE...           a worker (test-worker) that completes echo and
//	                         undo tasks with their input and fails fail tasks
//	complete TYPE            claims one task of TYPE as another worker and
//	                         completes it
//	sync                     waits until every agent applied what the leader
//	                         has (a read after a write then sees it anywhere)
//	submitid FILE            submits FILE (no wait), waits until every agent
//	                         applied it, sets ID and SHORT
//	exits N CMD ARGS...      runs CMD like exec and fails unless it exits N
//	capture REGEXP VAR...    sets each VAR to a submatch of REGEXP in the
//	                         last stdout
//	json PATH [OP] WANT      checks a value of the last stdout, a JSON
//	                         document (see jsonValues)
//	setjson VAR PATH         sets VAR to a value of the last stdout's JSON

// scriptState is one script's cluster (nil until `cluster`).
type scriptState struct {
	t  testing.TB
	tc *testCluster
}

type scriptStateKey struct{}

// clusterCmds are the script commands of a cluster (see above).
var clusterCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"cluster":  cmdCluster,
	"worker":   cmdWorker,
	"complete": cmdComplete,
	"sync":     cmdSync,
	"submitid": cmdSubmitID,
	"exits":    cmdExits,
	"capture":  cmdCapture,
	"json":     cmdJSON,
	"setjson":  cmdSetJSON,
}

// setupScriptState gives each script a state its commands share; the
// script's T is the subtest's, so a cluster stops when the script ends.
func setupScriptState(env *testscript.Env) error {
	t, ok := env.T().(testing.TB)
	if !ok {
		return fmt.Errorf("testscript's T (%T) is not a testing.TB", env.T())
	}
	env.Values[scriptStateKey{}] = &scriptState{t: t}
	return nil
}

func state(ts *testscript.TestScript) *scriptState {
	return ts.Value(scriptStateKey{}).(*scriptState)
}

// running returns the script's cluster, failing the script without one.
func running(ts *testscript.TestScript, cmd string) (*testCluster, testing.TB) {
	st := state(ts)
	if st.tc == nil {
		ts.Fatalf("%s: no cluster; start one with `cluster` first", cmd)
	}
	return st.tc, st.t
}

func cmdCluster(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: cluster")
	}
	st := state(ts)
	if st.tc != nil {
		ts.Fatalf("cluster: one is already running")
	}
	st.tc = startCluster(st.t)
	ts.Setenv("FLOWD_ADDR", st.tc.addr)
	ts.Setenv("AGENTS", st.tc.dir)
}

func cmdWorker(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: worker TYPE...")
	}
	tc, t := running(ts, "worker")
	tc.startWorker(t, args...)
}

func cmdComplete(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: complete TYPE")
	}
	tc, t := running(ts, "complete")
	tc.completeOne(t, args[0])
}

func cmdSync(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: sync")
	}
	tc, t := running(ts, "sync")
	tc.sync(t)
}

func cmdSubmitID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: submitid FILE")
	}
	tc, t := running(ts, "submitid")
	id := tc.submitID(t, ts.MkAbs(args[0]))
	ts.Setenv("ID", id)
	ts.Setenv("SHORT", shortID(id))
}

func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N CMD ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: N: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			ts.Fatalf("exits: %v", err)
		}
		got = exit.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: capture REGEXP VAR...")
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil || len(m) != len(args) {
		ts.Fatalf("capture: %q does not match stdout with %d submatches", args[0], len(args)-1)
	}
	for i, v := range args[1:] {
		ts.Setenv(v, m[i+1])
	}
}

func cmdSetJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setjson VAR PATH")
	}
	vals, err := jsonValues(ts.ReadFile("stdout"), args[1])
	ts.Check(err)
	if len(vals) != 1 {
		ts.Fatalf("setjson: %s names %d values", args[1], len(vals))
	}
	ts.Setenv(args[0], vals[0])
}

// cmdJSON checks json PATH [OP] WANT: OP is == (the default), !=, <, <=,
// >, >= (numbers) or ~ (WANT is a regexp). A path with * checks every
// element; a path that names nothing fails ==, passes !=.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	op := "=="
	switch len(args) {
	case 2:
	case 3:
		op = args[1]
		args = []string{args[0], args[2]}
	default:
		ts.Fatalf("usage: json PATH [OP] WANT")
	}
	path, want := args[0], args[1]
	vals, err := jsonValues(ts.ReadFile("stdout"), path)
	ts.Check(err)
	ok := true
	for _, v := range vals {
		good, err := compare(v, op, want)
		ts.Check(err)
		ok = ok && good
	}
	if len(vals) == 0 {
		ok = op == "!="
	}
	if ok == neg {
		ts.Fatalf("json %s %s %s: %s is %q", path, op, want, path, vals)
	}
}

func compare(got, op, want string) (bool, error) {
	switch op {
	case "==":
		return got == want, nil
	case "!=":
		return got != want, nil
	case "~":
		re, err := regexp.Compile(want)
		if err != nil {
			return false, err
		}
		return re.MatchString(got), nil
	}
	g, err1 := strconv.ParseFloat(got, 64)
	w, err2 := strconv.ParseFloat(want, 64)
	if err := errors.Join(err1, err2); err != nil {
		return false, fmt.Errorf("%s compares numbers: %w", op, err)
	}
	switch op {
	case "<":
		return g < w, nil
	case "<=":
		return g <= w, nil
	case ">":
		return g > w, nil
	case ">=":
		return g >= w, nil
	}
	return false, fmt.Errorf("unknown operator %q (want ==, !=, <, <=, >, >= or ~)", op)
}

// jsonValues returns the values at path in the JSON document doc, each as
// text: a string as itself, anything else as JSON. The path's steps are
// separated by dots: an object key, an array index, len() (the length of an
// array or object), * (every element) or KEY=VALUE (the elements of an
// array whose KEY is VALUE); \. is a dot inside a step. A step that names
// nothing ends that branch (no value).
func jsonValues(doc, path string) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("stdout is not JSON: %w", err)
	}
	vals := []any{v}
	if path != "." {
		for _, step := range pathSteps(path) {
			var next []any
			for _, v := range vals {
				next = append(next, jsonStep(v, step)...)
			}
			vals = next
		}
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
			continue
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		out = append(out, strings.TrimSpace(b.String()))
	}
	return out, nil
}

func jsonStep(v any, step string) []any {
	switch x := v.(type) {
	case map[string]any:
		switch step {
		case "len()":
			return []any{json.Number(strconv.Itoa(len(x)))}
		case "*":
			var all []any
			for _, e := range x {
				all = append(all, e)
			}
			return all
		}
		if e, ok := x[step]; ok {
			return []any{e}
		}
	case []any:
		switch step {
		case "len()":
			return []any{json.Number(strconv.Itoa(len(x)))}
		case "*":
			return x
		}
		if i, err := strconv.Atoi(step); err == nil && i >= 0 && i < len(x) {
			return []any{x[i]}
		}
		if key, want, ok := strings.Cut(step, "="); ok {
			var match []any
			for _, e := range x {
				if m, ok := e.(map[string]any); ok && fmt.Sprint(m[key]) == want {
					match = append(match, e)
				}
			}
			return match
		}
	}
	return nil
}

// pathSteps splits a path at its dots that are not escaped (\.).
func pathSteps(path string) []string {
	var steps []string
	var cur strings.Builder
	for i := 0; i < len(path); i++ {
		switch {
		case path[i] == '\\' && i+1 < len(path) && path[i+1] == '.':
			cur.WriteByte('.')
			i++
		case path[i] == '.':
			steps = append(steps, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(path[i])
		}
	}
	return append(steps, cur.String())
}
