package fsm

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Invariant 7: a panic inside Apply (a bug) becomes an error result on
// every replica and changes nothing; the node keeps applying.
func TestApplyPanicIsAnErrorResultAndChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.submit("r", diamond)
	before := stateDigest(t, h.f)
	testApplyHook = func(c Command) {
		if c.Type() == MsgClaim {
			panic("injected bug")
		}
	}
	res := h.apply(&Claim{Waiters: []Waiter{{WorkerID: "w", Max: 1}}})
	testApplyHook = nil
	if err, ok := res.(error); !ok || !errors.Is(err, ErrApplyPanic) || !strings.Contains(err.Error(), "injected bug") {
		t.Fatalf("result %v, want ErrApplyPanic", res)
	}
	if stateDigest(t, h.f) != before {
		t.Fatal("a panicking entry changed state")
	}
	if h.f.AppliedIndex() != h.index {
		t.Fatal("the applied index did not advance past the bad entry")
	}
	if got := h.claim("w", 1); len(got) != 1 {
		t.Fatal("the FSM stopped working after a panic")
	}
}

// failingStore fails every commit: a local storage failure.
type failingStore struct{ store.Store }

func (failingStore) Commit([][]store.Write) error { return errors.New("disk on fire") }

// Invariant 7, second half: a local storage failure is not an entry result;
// the node must stop rather than diverge (OnFatal; the agent exits).
func TestStorageFailureStopsTheNode(t *testing.T) {
	f, err := New(failingStore{store.NewMemStore()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fatal error
	f.OnFatal = func(err error) { fatal = err }
	buf, _ := Encode(&Noop{})
	f.Apply(Entry{Index: 1, Data: buf})
	if fatal == nil || f.AppliedIndex() != 0 {
		t.Fatalf("storage failure: OnFatal got %v, applied %d", fatal, f.AppliedIndex())
	}
}

// Invariant 4: a task cannot loop forever through reaps; expiries of
// acknowledged leases spend attempts (retried with backoff) and the last one
// fails the task.
func TestReapsExhaustAttempts(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"x","type":"t","lease_ms":100,"retry":{"max_attempts":2,"initial_backoff_ms":10}}]}`)
	for i := 0; i < 2; i++ {
		c := h.claimOne("w")
		h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken})
		h.now += 101
		h.ok(&Reap{})
		h.now += 10
		h.ok(&Tick{})
	}
	_, ts := h.run("r")
	x := ts["x"]
	if x.State != domain.TaskFailed || len(x.Attempts) != 2 || x.Attempts[1].Outcome != OutcomeLeaseExpired || h.runState("r") != domain.RunFailed {
		t.Fatalf("task %s attempts %+v run %s", x.State, x.Attempts, h.runState("r"))
	}
	if got := h.claim("w", 1); len(got) != 0 {
		t.Fatal("an exhausted task was dispatched again")
	}
}

// Invariant 2: Apply reads no clock and draws no randomness. The state
// machine's non-test code must not touch time.Now or math/rand at all (time
// enters only as the leader's stamp on each command).
func TestNoClockOrRandomnessInTheStateMachine(t *testing.T) {
	for _, dir := range []string{".", "domain"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				if p := strings.Trim(imp.Path.Value, `"`); p == "math/rand" || p == "math/rand/v2" || p == "crypto/rand" {
					t.Errorf("%s imports %s", f, p)
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
						t.Errorf("%s: time.%s in the state machine", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// Invariant 1: one writer. Outside package fsm no code writes the state
// store: nothing but the FSM calls Commit or Replace on a store.Store (the
// cluster only opens the store and hands it to fsm.New).
func TestOnlyTheFSMWritesState(t *testing.T) {
	root := ".."
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(rel, "fsm"+string(filepath.Separator)) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		imports := map[string]bool{}
		namesStore := false
		for _, imp := range file.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			name := filepath.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = true
			namesStore = namesStore || p == "github.com/flowd/flowd/fsm" || p == "github.com/flowd/flowd/fsm/store"
		}
		if !namesStore {
			return nil // cannot even name the store
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Commit" && sel.Sel.Name != "Replace") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] {
				return true // a package function such as strings.Replace
			}
			t.Errorf("%s: %s call outside the FSM: only Apply and Restore write state", fset.Position(call.Pos()), sel.Sel.Name)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// flush rewrites a loaded record only when its encoding changed, and then
// stamps it with the entry's index.
func TestUnchangedRecordsAreNotRewritten(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","input":{"modify_index":1}}]}`)
	r, _ := h.run("r")
	created := r.ModifyIndex
	h.ok(&Noop{})
	h.ok(&Heartbeat{TaskID: "r/a", Token: 99}) // loads the task, changes nothing
	if _, ts := h.run("r"); ts["a"].ModifyIndex != created {
		t.Fatalf("an unchanged task was rewritten: modify index %d -> %d", created, ts["a"].ModifyIndex)
	}
	h.claimOne("w")
	if _, ts := h.run("r"); ts["a"].ModifyIndex != h.index {
		t.Fatalf("a changed task kept modify index %d (entry %d)", ts["a"].ModifyIndex, h.index)
	}
}
