package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// run.list's selector, through a follower with consistent reads (the
// leader answers): every term kind, ANDed with labels, and a malformed
// selector refused with invalid params naming the term.
func TestRunListSelector(t *testing.T) {
	agents := startAgents(t, 3)
	_, fs := followers(agents)
	c := client(t, fs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wf := []byte(`{"name":"etl","tasks":[{"key":"a","type":"sel"}]}`)
	byName := map[string]string{}
	for name, labels := range map[string]map[string]string{
		"prod-web":  {"env": "prod", "team": "web"},
		"prod-data": {"env": "prod", "team": "data"},
		"prod-solo": {"env": "prod"},
		"dev-web":   {"env": "dev", "team": "web", "spot": "yes"},
		"bare":      nil,
	} {
		sub, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: wf, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		byName[sub.ID] = name
	}
	list := func(p rpc.ListParams) []string {
		t.Helper()
		p.Consistent = true
		res, err := c.RunList(ctx, p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		var out []string
		for _, r := range res.Runs {
			out = append(out, byName[r.ID])
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		p    rpc.ListParams
		want []string
	}{
		{rpc.ListParams{Selector: "env=prod,team!=data"}, []string{"prod-solo", "prod-web"}},
		{rpc.ListParams{Selector: "env==prod,team"}, []string{"prod-data", "prod-web"}},
		{rpc.ListParams{Selector: "team,!spot"}, []string{"prod-data", "prod-web"}},
		{rpc.ListParams{Selector: "!env"}, []string{"bare"}},
		{rpc.ListParams{Selector: "env!=prod"}, []string{"bare", "dev-web"}},
		{rpc.ListParams{Selector: "team!=data", Labels: map[string]string{"team": "web"}}, []string{"dev-web", "prod-web"}},
		{rpc.ListParams{Selector: "env=dev", Labels: map[string]string{"env": "prod"}}, nil},
		{rpc.ListParams{Selector: ""}, []string{"bare", "dev-web", "prod-data", "prod-solo", "prod-web"}},
	} {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("selector %q labels %v: %q, want %q", tc.p.Selector, tc.p.Labels, got, tc.want)
		}
	}
	_, err := c.RunList(ctx, rpc.ListParams{Selector: "env=prod,=data"})
	var re *rpc.Error
	if !errors.Is(err, domain.ErrInvalidArgument) || !errors.As(err, &re) || re.Code != rpc.CodeInvalidParams ||
		!strings.Contains(err.Error(), `selector term 2 "=data": empty key`) {
		t.Fatalf("bad selector: %v", err)
	}
}
