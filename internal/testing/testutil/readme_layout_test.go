package testutil

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's Layout table names every folder that holds Go code: a row
// names a folder exactly (`fsm/store`) or a group of them (`internal/…`), or
// a row names it in its text (`rpc/defrpc` in rpc's). A package folder the
// table does not name, or a row naming a folder that does not exist, fails
// this test, so the table keeps matching the tree.
func TestLayoutTableMatchesTheTree(t *testing.T) {
	root, module := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| folder | holds |")
	if !ok {
		t.Fatal("README.md has no Layout table (a header row | folder | holds |)")
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	var exact, groups []string
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		if g, ok := strings.CutSuffix(m[1], "/…"); ok {
			groups = append(groups, g)
		} else {
			exact = append(exact, m[1])
		}
	}
	dirs := map[string]bool{}
	for _, f := range nonTestFiles(t, root, module) {
		if d := filepath.ToSlash(filepath.Dir(f.rel)); d != "." {
			dirs[d] = true
		}
	}
	covered := func(d string) bool {
		if slices.Contains(exact, d) || strings.Contains(table, "`"+d+"`") {
			return true
		}
		for _, g := range groups {
			if strings.HasPrefix(d, g+"/") {
				return true
			}
		}
		// examples/ holds programs to read, not packages of the product.
		return strings.HasPrefix(d, "examples/") && slices.Contains(exact, "examples")
	}
	for _, d := range slices.Sorted(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	}) {
		if !covered(d) {
			t.Errorf("package folder %s has no row in README.md's Layout table", d)
		}
	}
	for _, e := range exact {
		if st, err := os.Stat(filepath.Join(root, e)); err != nil || !st.IsDir() {
			t.Errorf("README.md's Layout table names %s, which is not a folder of the repository", e)
		}
	}
}
