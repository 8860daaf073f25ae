package testutil

import (
	"os/exec"
	"strings"
	"testing"
)

// daemon and the cluster vocabulary it speaks do not link raft: only
// cluster/raftnode does, and only the composition roots (cmd/flowd,
// testagents) import that (daemon/DESIGN.md, "The seam"; cluster/DESIGN.md).
// Dependencies of the packages' own tests do not count (go list -deps
// without -test), as they do not link into the agent's daemon package.
func TestLayoutDaemonDoesNotLinkRaft(t *testing.T) {
	root, module := moduleRoot(t)
	deps := func(pkg string) []string {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = root
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
		}
		return strings.Fields(string(out))
	}
	for _, pkg := range []string{module + "/daemon", module + "/cluster"} {
		for _, d := range deps(pkg) {
			if strings.HasPrefix(d, "github.com/hashicorp/raft") {
				t.Errorf("%s depends on %s (see `go list -deps %s`): reach the node through daemon's interfaces (seam.go) and package cluster's types, not cluster/raftnode", pkg, d, pkg)
			}
		}
	}
	// The check can fail: it sees raft where it is linked.
	if d := deps(module + "/cluster/raftnode"); !strings.Contains(" "+strings.Join(d, " ")+" ", " github.com/hashicorp/raft ") {
		t.Fatalf("go list -deps cluster/raftnode lists no github.com/hashicorp/raft: the check no longer sees raft")
	}
}
