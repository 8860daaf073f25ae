package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The offline recover command's refusals that need no data dir (the
// recovery itself: cluster's TestRecover*, e2e TestRecoverFromLostMajority).
func TestRaftRecoverRefusals(t *testing.T) {
	dir := t.TempDir()
	peersFile := func(body string) string {
		p := filepath.Join(t.TempDir(), "peers.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := []string{"flowd", "operator", "raft", "recover"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no node or dir", nil, 2, "--node-id and --data-dir are required"},
		{"both lists", []string{"--node-id", "n1", "--data-dir", dir, "--peers", "n1=127.0.0.1:1", "--peers-file", "x.json"}, 2, "not both"},
		{"bad peers", []string{"--node-id", "n1", "--data-dir", dir, "--peers", "n1"}, 2, "id=host:port"},
		{"non-voter", []string{"--node-id", "n1", "--data-dir", dir, "--peers-file", peersFile(`[{"id":"n1","address":"127.0.0.1:1","non_voter":true}]`)}, 2, "non_voter"},
		{"not JSON", []string{"--node-id", "n1", "--data-dir", dir, "--peers-file", peersFile(`n1=127.0.0.1:1`)}, 2, "JSON array"},
		{"no raft log", []string{"--node-id", "n1", "--data-dir", dir}, 1, "no raft log"},
		{"dry run, no raft log", []string{"--node-id", "n1", "--data-dir", dir, "--dry-run"}, 1, "no raft log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(t.Context(), append(append([]string(nil), base...), tc.args...), nil, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s%s", code, tc.code, tc.want, out.String(), errb.String())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); err == nil {
		t.Fatal("a refused recover created a raft dir")
	}
}
