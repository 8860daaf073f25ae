package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The agent binary the suite runs is cmd/flowd built from this tree with a
// `go build -overlay` that adds test hooks to package raftnode (cluster/raftnode) without
// touching the source: after raftnode.Config's defaults are taken, these
// environment variables override them (unset: production behaviour).
//
//	FLOWD_CHAOS_CLOCK_OFFSET      duration added to the node's clock (the
//	                              clock the leader stamps commands with)
//	FLOWD_CHAOS_SNAPSHOT_THRESHOLD, FLOWD_CHAOS_TRAILING_LOGS,
//	FLOWD_CHAOS_SNAPSHOT_INTERVAL raft snapshot settings, so a follower
//	                              that falls behind is sent a snapshot
//	                              within seconds instead of after 16k
//	                              entries and 30-60 s
//
// A Go binary is static (CGO_ENABLED=0), so libfaketime cannot offset its
// clock, and time namespaces offset only the monotonic clocks; the overlay
// is the least intrusive way to give one process a different wall clock.
const hooksSrc = `package raftnode

import (
	"os"
	"strconv"
	"time"
)

func chaosDefaults(c *Config) {
	if d, err := time.ParseDuration(os.Getenv("FLOWD_CHAOS_CLOCK_OFFSET")); err == nil && d != 0 {
		base := c.Clock
		c.Clock = func() time.Time { return base().Add(d) }
	}
	if n, err := strconv.ParseUint(os.Getenv("FLOWD_CHAOS_SNAPSHOT_THRESHOLD"), 10, 64); err == nil && n > 0 {
		c.SnapshotThreshold = n
	}
	if n, err := strconv.ParseUint(os.Getenv("FLOWD_CHAOS_TRAILING_LOGS"), 10, 64); err == nil && n > 0 {
		c.TrailingLogs = n
	}
	if d, err := time.ParseDuration(os.Getenv("FLOWD_CHAOS_SNAPSHOT_INTERVAL")); err == nil && d > 0 {
		c.SnapshotInterval = d
	}
}
`

const hookAnchor = "func (c *Config) defaults() {"

// BuildAgent builds cmd/flowd with the hooks into dir/flowd-chaos. root is
// the module root. It fails if the anchor it patches is gone (then the
// suite must be updated, not silently run without hooks).
//
// With FLOWD_CHAOS_FROM_HEAD=1 it builds the committed HEAD (exported with
// `git archive` into dir) instead of the working tree: for running the suite
// while others have half-done edits in the same tree.
func BuildAgent(root, dir string) (string, error) { return buildAgent(root, dir, "flowd-chaos", "") }

// BuildNextAgent builds the binary a RollingUpgrade cycle upgrades to:
// BuildAgent's with -tags flowd_testv2 (one state-machine version ahead,
// with one rule that differs: fsm/version_max_testv2.go).
func BuildNextAgent(root, dir string) (string, error) {
	return buildAgent(root, dir, "flowd-chaos-v2", "flowd_testv2")
}

func buildAgent(root, dir, name, tags string) (string, error) {
	if os.Getenv("FLOWD_CHAOS_FROM_HEAD") != "" {
		src := filepath.Join(dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", err
		}
		cmd := exec.Command("sh", "-c", "git -C \""+root+"\" archive HEAD | tar -x -C \""+src+"\"")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("export HEAD: %w: %s", err, out)
		}
		root = src
	}
	node := filepath.Join(root, "cluster", "raftnode", "node.go")
	src, err := os.ReadFile(node)
	if err != nil {
		return "", err
	}
	if strings.Count(string(src), hookAnchor) != 1 {
		return "", errors.New("chaos: cluster/raftnode/node.go no longer has exactly one " + hookAnchor + "; update internal/testing/chaos/build.go")
	}
	patched := strings.Replace(string(src), hookAnchor, hookAnchor+"\n\tdefer chaosDefaults(c)", 1)
	pNode, pHooks := filepath.Join(dir, "node.go"), filepath.Join(dir, "chaos_hooks.go")
	if err := os.WriteFile(pNode, []byte(patched), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(pHooks, []byte(hooksSrc), 0o644); err != nil {
		return "", err
	}
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {
		node: pNode, filepath.Join(root, "cluster", "raftnode", "zz_chaos_hooks.go"): pHooks}})
	ovPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-overlay", ovPath, "-tags", tags, "-o", bin, "./cmd/flowd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build agent: %w: %s", err, out)
	}
	return bin, nil
}
