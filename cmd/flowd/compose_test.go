package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of a compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `json:"image"`
		Entrypoint  []string          `json:"entrypoint"`
		Command     []string          `json:"command"`
		User        string            `json:"user"`
		Environment map[string]string `json:"environment"`
		Ports       []string          `json:"ports"`
		Volumes     []string          `json:"volumes"`
		DependsOn   map[string]struct {
			Condition string `json:"condition"`
		} `json:"depends_on"`
		Healthcheck *struct {
			Test []string `json:"test"`
		} `json:"healthcheck"`
	} `json:"services"`
	Volumes map[string]any `json:"volumes"`
}

// The example compose file parses (anchors and merge keys resolved) and
// keeps its shape: three agents with TLS, a /readyz healthcheck, the client
// listener published and the HTTP listener not, and a worker that waits
// for healthy agents and reaches them by their sockets.
func TestComposeFile(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "deploy", "docker-compose.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	certs, ok := c.Services["tls-certs"]
	if !ok || !slices.Contains(certs.Command, "localhost") {
		t.Errorf("tls-certs %v: want node certificates that also name localhost (clients on the host)", certs.Command)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		s, ok := c.Services[n]
		if !ok {
			t.Fatalf("no agent service %s", n)
		}
		env := s.Environment
		if env["FLOWD_NODE_ID"] != n || env["FLOWD_TLS_CERT"] == "" || env["FLOWD_TLS_CA"] == "" || env["FLOWD_CLIENT_ADDR"] == "" {
			t.Errorf("%s: node id, TLS or client listener missing from %v", n, env)
		}
		if env["FLOWD_ADDR"] != "unix://"+env["FLOWD_SOCKET"] {
			t.Errorf("%s: FLOWD_ADDR %q, want the agent's socket (exec %s /flowd tui uses it)", n, env["FLOWD_ADDR"], n)
		}
		if _, ok := env["FLOWD_INSECURE_PLAINTEXT"]; ok {
			t.Errorf("%s runs plaintext", n)
		}
		if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/flowd", "ready"}) {
			t.Errorf("%s: healthcheck %+v, want /flowd ready (GET /readyz)", n, s.Healthcheck)
		}
		_, client, _ := strings.Cut(env["FLOWD_CLIENT_ADDR"], ":")
		_, http, _ := strings.Cut(env["FLOWD_HTTP_ADDR"], ":")
		published := false
		for _, p := range s.Ports {
			if strings.HasSuffix(p, ":"+http) {
				t.Errorf("%s publishes the HTTP listener (%s): metrics stay on the container network", n, p)
			}
			published = published || strings.HasSuffix(p, ":"+client)
		}
		if !published {
			t.Errorf("%s: ports %v do not publish the client listener %s", n, s.Ports, client)
		}
		if !slices.Contains(s.Volumes, "sock-"+n+":"+filepath.Dir(env["FLOWD_SOCKET"])) {
			t.Errorf("%s: the socket directory of %s is not the volume sock-%s: %v", n, env["FLOWD_SOCKET"], n, s.Volumes)
		}
	}
	w, ok := c.Services["worker"]
	if !ok {
		t.Fatal("no worker service")
	}
	if w.User == "" || strings.HasPrefix(w.User, "0:") || w.User == "0" {
		t.Errorf("worker user %q: want an unprivileged uid", w.User)
	}
	uid, _, _ := strings.Cut(w.User, ":")
	if got := c.Services["n1"].Environment["FLOWD_ALLOW_WORKER_UIDS"]; got != uid {
		t.Errorf("FLOWD_ALLOW_WORKER_UIDS %q, want the worker's uid %s", got, uid)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if w.DependsOn[n].Condition != "service_healthy" {
			t.Errorf("worker depends on %s with %q, want service_healthy", n, w.DependsOn[n].Condition)
		}
		if !strings.Contains(w.Environment["FLOWD_ADDR"], "unix:///run/"+n+"/") {
			t.Errorf("worker FLOWD_ADDR %q lacks %s's socket", w.Environment["FLOWD_ADDR"], n)
		}
	}
	for _, v := range []string{"n1", "sock-n1", "tls"} {
		if _, ok := c.Volumes[v]; !ok {
			t.Errorf("volume %s not declared", v)
		}
	}
}

// flowd ready, the compose healthcheck: exit 0 on 200 from /readyz, 1 with
// the agent's reason otherwise; an unspecified host means this machine.
func TestReadyCommand(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready.Load() {
			http.Error(w, "not ready: no leader (election in progress or no quorum)", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	call := func() (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"flowd", "ready", "--http-addr", "0.0.0.0:" + port}, strings.NewReader(""), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := call(); code != 0 || !strings.Contains(out, "ready") {
		t.Fatalf("ready agent: exit %d, %q", code, out)
	}
	ready.Store(false)
	if code, out := call(); code != 1 || !strings.Contains(out, "no leader") {
		t.Fatalf("agent without a leader: exit %d, %q; want 1 and the reason", code, out)
	}
	if _, err := readyURL("nonsense", "/readyz"); err == nil {
		t.Fatal("readyURL accepted an address without a port")
	}
}
