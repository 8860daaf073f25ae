package testutil

import (
	"bufio"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The folders say what a package is: internal/ holds product leaves,
// internal/testing/ the test harnesses. Two rules keep it so:
//
//   - no product package under internal/ (outside internal/testing) imports
//     daemon, cmd/... or internal/testing/..., directly or through another
//     package (the leaves sit below everything that uses them);
//   - internal/testing/... is imported only by _test.go files and by other
//     packages under internal/testing (no product code links a harness).
//
// The direct imports come from parsing every .go file of the module
// whatever its build tags (a file behind flowd_testv2 or linux counts too);
// the transitive ones from go list for the packages under internal/.

// moduleRoot is the repository root: this package is internal/testing/testutil.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	root = filepath.Join(filepath.Dir(here), "..", "..", "..")
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("the repository root is no longer three levels above %s: %v", filepath.Dir(here), err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return root, strings.TrimSpace(m)
		}
	}
	t.Fatalf("%s/go.mod names no module", root)
	return "", ""
}

// goFile is one non-test .go file's package and imports.
type goFile struct {
	rel     string // path from the module root, slash-separated
	pkg     string // import path of its directory
	imports []string
}

// nonTestFiles parses the imports of every non-_test.go file in the module
// (skipping testdata, hidden and _ directories and nested modules, as the
// go tool does).
func nonTestFiles(t *testing.T, root, module string) []goFile {
	t.Helper()
	var out []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own (the patched raft)
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		g := goFile{rel: rel, pkg: module}
		if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." {
			g.pkg = module + "/" + dir
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return err
			}
			g.imports = append(g.imports, p)
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// under reports whether import path p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// forbiddenForLeaf names why a product leaf under internal/ may not import p
// ("" when it may).
func forbiddenForLeaf(module, p string) string {
	switch {
	case under(p, module+"/daemon"):
		return "daemon"
	case under(p, module+"/cmd"):
		return "cmd"
	case under(p, module+"/internal/testing"):
		return "internal/testing"
	}
	return ""
}

func TestLayoutDirectImports(t *testing.T) {
	root, module := moduleRoot(t)
	files := nonTestFiles(t, root, module)
	internal, harness := module+"/internal", module+"/internal/testing"
	leaves := 0
	for _, f := range files {
		isLeaf := under(f.pkg, internal) && !under(f.pkg, harness)
		if isLeaf {
			leaves++
		}
		for _, p := range f.imports {
			if isLeaf {
				if why := forbiddenForLeaf(module, p); why != "" {
					t.Errorf("%s imports %s: a product package under internal/ must not import %s (move the code it needs below internal/, or the package to internal/testing if it is a harness)", f.rel, p, why)
				}
				continue
			}
			if under(p, harness) && !under(f.pkg, harness) {
				t.Errorf("%s imports %s: internal/testing is for _test.go files and other harnesses only (product code may not link a test harness)", f.rel, p)
			}
		}
	}
	if leaves == 0 {
		t.Fatal("found no non-test file under internal/ outside internal/testing: the walk is broken")
	}
}

func TestLayoutNoArrowIntoDaemon(t *testing.T) {
	root, module := moduleRoot(t)
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Deps,Error", "./internal/...")
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v\n%s", err, stderr.String())
	}
	harness := module + "/internal/testing"
	dec := json.NewDecoder(strings.NewReader(string(out)))
	leaves := 0
	for {
		var p struct {
			ImportPath string
			Deps       []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		if under(p.ImportPath, harness) {
			continue
		}
		leaves++
		for _, d := range p.Deps {
			if why := forbiddenForLeaf(module, d); why != "" {
				t.Errorf("%s depends on %s: a product package under internal/ must not reach %s, even through another package", p.ImportPath, d, why)
			}
		}
	}
	if leaves == 0 {
		t.Fatal("go list found no package under internal/ outside internal/testing")
	}
}

// The state machine and its byte engine stay apart (fsm/store/DESIGN.md):
//
//   - package fsm imports no badger or ristretto package (the engine is
//     reached through fsm/store only);
//   - fsm/store imports nothing of this module (it knows no key of fsm's;
//     what it needs comes in as options).
func TestLayoutStateMachineAndByteEngine(t *testing.T) {
	root, module := moduleRoot(t)
	fsmPkg, storePkg := module+"/fsm", module+"/fsm/store"
	seen := map[string]bool{}
	for _, f := range nonTestFiles(t, root, module) {
		seen[f.pkg] = true
		for _, p := range f.imports {
			switch {
			case f.pkg == fsmPkg && strings.HasPrefix(p, "github.com/dgraph-io/"): // badger, ristretto
				t.Errorf("%s imports %s: package fsm reaches badger only through fsm/store", f.rel, p)
			case f.pkg == storePkg && under(p, module):
				t.Errorf("%s imports %s: fsm/store must not depend on flowd's packages (pass what it needs as an option)", f.rel, p)
			}
		}
	}
	if !seen[fsmPkg] || !seen[storePkg] {
		t.Fatalf("found no files of %s or %s: the walk is broken or the packages moved", fsmPkg, storePkg)
	}
}
