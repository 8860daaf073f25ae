package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/rpc"
)

// A worker token made over the Unix socket works with --token on a
// follower's TLS client listener: it claims and completes a task, and
// `settings set` is refused with the permission-denied message; the token
// is listed without its secret, and once deleted it no longer works.
func TestCLIACLTokens(t *testing.T) {
	ca, tweak := testagents.WithTLS(t, 3)
	ac := testagents.StartWith(t, 3, discardLogger, tweak)
	tc := &testCluster{agents: ac.Agents, stops: ac.Stops, eps: ac.Eps, addr: strings.Join(ac.Eps, ","), dir: ac.Dir}
	follower := 0
	for i, a := range ac.Agents {
		if !a.Node().IsLeader() {
			follower = i
		}
	}
	tlsEP := ac.ClientEndpoint(follower)

	// Create: the secret once, with the line saying so.
	r := tc.must(t, 0, "acl", "token", "create", "--role", "worker", "--name", "ci-workers")
	if !strings.Contains(r.out, "cannot be shown again") || !strings.Contains(r.out, "Role:    worker") {
		t.Fatalf("create output:\n%s", r)
	}
	var shown string
	for _, l := range strings.Split(r.out, "\n") {
		if v, ok := strings.CutPrefix(l, "Secret:"); ok {
			shown = strings.TrimSpace(v)
		}
	}
	if !strings.HasPrefix(shown, "flowd_") {
		t.Fatalf("no secret in the create output:\n%s", r)
	}
	r = tc.must(t, 0, "acl", "token", "create", "--role", "worker", "--name", "w2", "-o", "json")
	var made rpc.ACLTokenCreateResult
	if err := json.Unmarshal([]byte(r.out), &made); err != nil || made.Secret == "" || made.Role != "worker" || made.ID == "" {
		t.Fatalf("create --output json: %v\n%s", err, r)
	}
	if !strings.Contains(r.err, "cannot be shown again") {
		t.Fatalf("create --output json says nothing on stderr about the secret:\n%s", r)
	}
	tc.must(t, exitUsage, "acl", "token", "create", "--role", "root")
	tc.must(t, exitUsage, "acl", "token", "create")

	// List: both tokens, no secret.
	r = tc.must(t, 0, "acl", "token", "list")
	if !strings.Contains(r.out, "ci-workers") || !strings.Contains(r.out, made.ID) || strings.Contains(r.out, shown) || strings.Contains(r.out, made.Secret) {
		t.Fatalf("list:\n%s", r)
	}
	r = tc.must(t, 0, "acl", "token", "list", "-o", "json")
	var list rpc.ACLTokenListResult
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || len(list.Tokens) != 2 || strings.Contains(r.out, made.Secret) {
		t.Fatalf("list --output json: %v\n%s", err, r)
	}

	// Over TLS with the token: claim and complete.
	id := tc.submitID(t, writeFile(t, "wf.json", `{"name":"acl","tasks":[{"key":"a","type":"acl-echo"}]}`))
	tc.sync(t)
	worker := func(args ...string) result {
		t.Helper()
		var out, errb strings.Builder
		all := append([]string{"flowd", "--addr", tlsEP, "--ca-cert", ca, "--token", made.Secret}, args...)
		code := run(t.Context(), all, nil, &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	r = worker("rpc", "task.claim", `{"worker_id":"acl-w","types":["acl-echo"],"wait_ms":5000}`)
	var claimed rpc.ClaimResult
	if err := json.Unmarshal([]byte(r.out), &claimed); r.code != 0 || err != nil || len(claimed.Tasks) != 1 || claimed.Tasks[0].RunID != id {
		t.Fatalf("claim with a worker token over TLS: %v\n%s", err, r)
	}
	task := claimed.Tasks[0]
	done, _ := json.Marshal(rpc.CompleteParams{TaskID: task.TaskID, FencingToken: task.FencingToken, Result: json.RawMessage(`{"ok":1}`)})
	if r = worker("rpc", "task.complete", string(done)); r.code != 0 || !strings.Contains(r.out, `"accepted": true`) {
		t.Fatalf("complete with a worker token over TLS:\n%s", r)
	}

	// The worker role may not change settings.
	r = worker("settings", "set", "--max-running-runs", "5")
	if r.code != exitError || !strings.Contains(r.err, "permission denied: settings.set needs the admin role") || !strings.Contains(r.err, "token "+made.ID) {
		t.Fatalf("settings set with a worker token:\n%s", r)
	}
	// Without the CA the agent's certificate is not trusted: the error names --ca-cert.
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"flowd", "--addr", tlsEP, "--token", made.Secret, "queue", "list"}, nil, &out, &errb); code != exitError || !strings.Contains(errb.String(), "--ca-cert") {
		t.Fatalf("no --ca-cert: exit %d\n%s", code, errb.String())
	}

	// Delete: the secret stops working; deleting it again is an error.
	if r = tc.must(t, 0, "acl", "token", "delete", made.ID); !strings.Contains(r.out, "deleted") {
		t.Fatalf("delete:\n%s", r)
	}
	tc.sync(t)
	if r = worker("queue", "list"); r.code != exitError || !strings.Contains(r.err, "unknown or deleted token") {
		t.Fatalf("a deleted token:\n%s", r)
	}
	if r = tc.must(t, exitError, "acl", "token", "delete", made.ID); !strings.Contains(r.err, "flowd acl token list") {
		t.Fatalf("delete again:\n%s", r)
	}
}
