package domain

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyStdlib enforces the package rule: fsm/domain imports only
// the standard library. `go list -deps` of the non-test package is checked,
// so test-only dependencies (rapid) are allowed.
func TestImportsOnlyStdlib(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	const self = "github.com/flowd/flowd/fsm/domain"
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Dir = "." // tests run in the package directory
	var stderr strings.Builder
	cmd.Stderr = &stderr // warnings must not be mistaken for packages
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	sawSelf := false
	for _, line := range strings.Split(string(out), "\n") {
		pkg := strings.TrimSpace(line)
		switch pkg {
		case "":
		case self:
			sawSelf = true
		default:
			t.Errorf("fsm/domain must import only the standard library, but depends on %s", pkg)
		}
	}
	if !sawSelf {
		t.Errorf("go list -deps did not list %s itself; output:\n%s", self, out)
	}
}
