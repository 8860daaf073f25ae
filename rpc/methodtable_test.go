package rpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// methodConstants returns the package's Method* string constants (from
// every non-test .go file), constant name by method name.
func methodConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Method") || len(name.Name) == len("Method") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					m, _ := strconv.Unquote(lit.Value)
					if prev, dup := out[m]; dup {
						t.Errorf("%s and %s are both %q", prev, name.Name, m)
					}
					out[m] = name.Name
				}
			}
		}
	}
	return out
}

// The method table has one row per method constant and nothing else, and
// every lookup computed from it agrees with its row.
func TestMethodTable(t *testing.T) {
	consts := methodConstants(t)
	if len(consts) < 60 {
		t.Fatalf("found %d method constants; the parse missed some", len(consts))
	}
	seen := map[string]bool{}
	for _, m := range Methods() {
		if seen[m.Name] {
			t.Errorf("%q has two rows", m.Name)
		}
		seen[m.Name] = true
		if _, ok := consts[m.Name]; !ok {
			t.Errorf("row %q is no Method* constant", m.Name)
		}
		if m.Roles&^(RoleRead|RoleWorker) != 0 {
			t.Errorf("%s: roles %s (admin may call every method; list only the others)", m.Name, m.Roles)
		}
		if m.Flags&FlagConsistent != 0 && m.route != routeRead {
			t.Errorf("%s: a consistent read must be a read (route %d)", m.Name, m.route)
		}
		if got, ok := LookupMethod(m.Name); !ok || got != m {
			t.Errorf("LookupMethod(%s) = %+v, %v", m.Name, got, ok)
		}
		if LeaderBound(m.Name) != m.LeaderBound() || LeaderBound(m.Name) != (m.route == routeLeader) {
			t.Errorf("%s: LeaderBound %v, route %d", m.Name, LeaderBound(m.Name), m.route)
		}
		if MethodRoles(m.Name) != m.Roles|RoleAdmin || AdminOnly(m.Name) != (m.Roles == RoleNone) {
			t.Errorf("%s: MethodRoles %s, AdminOnly %v, row's roles %s", m.Name, MethodRoles(m.Name), AdminOnly(m.Name), m.Roles)
		}
	}
	for m, name := range consts {
		if !seen[m] {
			t.Errorf("%s (%q) has no row in methodTable", name, m)
		}
	}
	if len(methodRoutes) != len(seen) || len(methodRoles) != len(seen) || len(methodByName) != len(seen) {
		t.Errorf("lookups: %d routes, %d roles, %d rows by name; the table has %d methods", len(methodRoutes), len(methodRoles), len(methodByName), len(seen))
	}
	if _, ok := LookupMethod("no.such"); ok || !AdminOnly("no.such") || LeaderBound("no.such") {
		t.Error("an unknown method must be admin-only, not leader-bound, and have no row")
	}
	// Spot checks of rows the agent relies on.
	for _, c := range []struct {
		method    string
		forwarded bool
	}{{MethodRunSubmit, true}, {MethodRunGet, true}, {MethodSnapshotRead, true}, {MethodClusterStatus, false}, {MethodRunStats, false}} {
		if s, _ := LookupMethod(c.method); s.Forwarded() != c.forwarded {
			t.Errorf("%s: Forwarded %v", c.method, !c.forwarded)
		}
	}
}
