package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
	"github.com/flowd/flowd/rpc"
)

// TestComposeUp brings up the compose example (examples/deploy) as it is
// shipped: the FROM scratch image built from this tree's static binaries,
// the certificate-making services, three agents with mutual TLS and the
// example worker. It makes an admin token inside n1 (the socket), waits
// for every agent to name the same leader over the published TLS client
// listeners with that token, submits examples/workflows/hello.json there,
// and waits for the compose worker to complete it. `docker-compose down -v`
// runs at the end whatever happened.
//
// It needs Docker and docker-compose (v1, the `docker-compose` command)
// and takes about a minute, so it runs only with FLOWD_DOCKER=1 (`make
// compose-test`), not in `make test`. The image is tagged flowd:dev, what
// the compose file runs (the same tag `make image` makes); the host ports
// 7401-7403 of the compose file must be free.
func TestComposeUp(t *testing.T) {
	if os.Getenv("FLOWD_DOCKER") != "1" {
		t.Skip("set FLOWD_DOCKER=1 (make compose-test) to bring up the compose example with Docker")
	}
	for _, tool := range []string{"docker", "docker-compose"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("FLOWD_DOCKER=1 but %s is not installed: install Docker Engine and docker-compose, or unset FLOWD_DOCKER", tool)
		}
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("FLOWD_DOCKER=1 but the Docker daemon is not reachable (%v): start it, or unset FLOWD_DOCKER\n%s", err, out)
	}
	began := time.Now()
	root, _ := filepath.Abs(repoRoot())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(dir string, env []string, name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out), fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out), nil
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// The image: static binaries in a build context of their own (bin/ of
	// the tree is left alone), the Dockerfile and mount points of the tree.
	bctx := t.TempDir()
	for out, pkg := range map[string]string{"bin/flowd": "./cmd/flowd", "bin/flowd-example-worker": "./examples/worker"} {
		must(run(root, []string{"CGO_ENABLED=0"}, "go", "build", "-ldflags", "-s -w", "-o", filepath.Join(bctx, out), pkg))
	}
	must(run(root, nil, "mkdir", "-p", filepath.Join(bctx, "examples", "deploy")))
	must(run(root, nil, "cp", "-a", filepath.Join(root, "examples", "deploy", "rootfs"), filepath.Join(bctx, "examples", "deploy", "rootfs")))
	must(run(bctx, nil, "docker", "build", "-q", "-t", "flowd:dev", "-f", filepath.Join(root, "examples", "deploy", "Dockerfile"), "."))
	built := time.Since(began)

	project := fmt.Sprintf("flowdcompose%d", os.Getpid())
	compose := func(args ...string) (string, error) {
		return run(root, nil, "docker-compose", append([]string{"-p", project, "-f", filepath.Join(root, "examples", "deploy", "docker-compose.yml")}, args...)...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := compose("logs", "--no-color", "--tail", "30")
			t.Logf("--- compose logs (tail) ---\n%s", logs)
		}
		// A context of its own: the test's may have expired.
		down := exec.Command("docker-compose", "-p", project, "-f", filepath.Join(root, "examples", "deploy", "docker-compose.yml"), "down", "-v", "--remove-orphans")
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("docker-compose down -v: %v\n%s", err, out)
		}
	})
	must(compose("up", "-d"))
	up := time.Since(began)

	// An admin token, made on n1's socket (the agent's own user is admin
	// there); it needs a leader, so it is retried until one is elected.
	var tok rpc.ACLTokenCreateResult
	// readiness polling of containers
	testutil.Eventually(t, 90*time.Second, time.Second, "an admin token from n1", func() error {
		out, err := compose("exec", "-T", "n1", "/flowd", "-o", "json", "acl", "token", "create", "--role", "admin", "--name", "compose-test")
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &tok); err != nil {
			return err
		}
		if tok.Secret == "" {
			return errors.New("a token without a secret")
		}
		return nil
	})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	id := strings.TrimSpace(must(compose("ps", "-q", "n1")))
	must(run(root, nil, "docker", "cp", id+":/tls/ca.pem", caFile))
	tlsCfg, err := rpc.ClientTLSConfig(caFile)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(token string, addrs ...string) *rpc.Client {
		cl, err := rpc.NewClient(addrs, rpc.ClientOptions{Token: token, TLS: tlsCfg, MaxAttempts: 3, BackoffCap: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}

	// Every agent names the same leader, asked over its published TLS
	// client listener with the token; without a token the call is refused.
	addrs := []string{"tls://127.0.0.1:7401", "tls://127.0.0.1:7402", "tls://127.0.0.1:7403"}
	var clients []*rpc.Client
	for _, a := range addrs {
		clients = append(clients, dial(tok.Secret, a))
	}
	var leader string
	// readiness polling of containers
	testutil.Eventually(t, 60*time.Second, 500*time.Millisecond, "the agents to agree on a leader", func() error {
		seen := map[string]bool{}
		for _, c := range clients {
			var st rpc.ClusterStatus
			cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
			if err := c.CallIdempotent(cctx, rpc.MethodClusterStatus, struct{}{}, &st); err == nil && st.LeaderID != "" {
				seen[st.LeaderID] = true
				leader = st.LeaderID
			} else {
				seen[""] = true
			}
			ccancel()
		}
		if len(seen) == 1 && !seen[""] {
			return nil
		}
		return fmt.Errorf("leaders named: %v", seen)
	})
	elected := time.Since(began)
	var st rpc.ClusterStatus
	if err := dial("", addrs[0]).CallIdempotent(ctx, rpc.MethodClusterStatus, struct{}{}, &st); !errors.Is(err, rpc.ErrPermissionDenied) {
		t.Fatalf("cluster.status without a token: %v, want permission denied", err)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		logs := must(compose("logs", "--no-color", n))
		if !strings.Contains(logs, "mutual TLS between nodes") || strings.Contains(logs, "plaintext and unauthenticated") {
			t.Fatalf("%s does not run mutual TLS:\n%s", n, tail(logs, 20))
		}
	}

	// A workflow the compose worker completes.
	spec, err := os.ReadFile(filepath.Join(root, "examples", "workflows", "hello.json"))
	if err != nil {
		t.Fatal(err)
	}
	cl := dial(tok.Secret, addrs...)
	res, err := cl.RunSubmit(ctx, rpc.SubmitParams{Workflow: spec})
	if err != nil {
		t.Fatalf("submit over TLS with the token: %v", err)
	}
	w, err := cl.RunWait(ctx, res.ID, 60_000)
	if err != nil || !w.Done || w.Run.State != "succeeded" {
		t.Fatalf("run %s: %v %+v (the compose worker should complete it)", res.ID, err, w)
	}
	t.Logf("image built in %s, stack up in %s, leader %s agreed in %s, hello.json succeeded in %s (%s in all, before down)",
		built.Round(time.Millisecond), (up - built).Round(time.Millisecond), leader, (elected - up).Round(time.Millisecond),
		(time.Since(began) - elected).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}
