package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// dashboardExprs returns every PromQL string of a Grafana dashboard: the
// panels' target exprs and the template variables' queries.
func dashboardExprs(v any, key string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			dashboardExprs(c, k, out)
		}
	case []any:
		for _, c := range x {
			dashboardExprs(c, key, out)
		}
	case string:
		if key == "expr" || key == "definition" || key == "query" {
			*out = append(*out, x)
		}
	}
}

// Every metric the example Grafana dashboard queries exists on a live
// agent's /metrics once it has run a few tasks (a histogram's _bucket,
// _sum and _count are its family).
func TestDashboardMetricsExist(t *testing.T) {
	path := filepath.Join("..", "examples", "deploy", "grafana", "flowd.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	var exprs []string
	dashboardExprs(dash["panels"], "", &exprs)
	if len(exprs) < 20 {
		t.Fatalf("%s: %d panel queries, want the full dashboard", path, len(exprs))
	}
	dashboardExprs(dash["templating"], "", &exprs)
	names := map[string]bool{}
	re := regexp.MustCompile(`flowd_[a-z0-9_]+`)
	for _, e := range exprs {
		for _, n := range re.FindAllString(e, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				n = strings.TrimSuffix(n, suffix)
			}
			names[n] = true
		}
	}
	a, url := startHTTPAgent(t)
	runTasks(t, a)
	fams := scrape(t, url)
	var missing []string
	for n := range names {
		if fams[n] == nil {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("%s queries metrics /metrics does not have: %v", path, missing)
	}
	for _, want := range []string{"flowd_task_queue_wait_seconds", "flowd_task_run_seconds", "flowd_task_attempts_total",
		"flowd_raft_commit_time_seconds", "flowd_leadership_gained_total", "flowd_claims_waiting", "flowd_queue_ready", "flowd_queue_running"} {
		if !names[want] {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
}
