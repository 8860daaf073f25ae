package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

func layersOf(g *dag) map[string]int {
	out := map[string]int{}
	for _, v := range g.vs {
		if v.key != "" {
			out[v.key] = v.layer
		}
	}
	return out
}

func TestDAGLayersAreLongestPaths(t *testing.T) {
	g := layoutDAG([]dagNode{
		{Key: "a"},
		{Key: "b", Deps: []string{"a"}},
		{Key: "c", Deps: []string{"a"}},
		{Key: "d", Deps: []string{"b", "c"}},
		{Key: "e", Deps: []string{"a", "d"}}, // a->e spans three layers
		{Key: "f"},                           // a second root
		{Key: "g", Deps: []string{"missing"}},
	})
	want := map[string]int{"a": 0, "b": 1, "c": 1, "d": 2, "e": 3, "f": 0, "g": 0}
	got := layersOf(g)
	for k, l := range want {
		if got[k] != l {
			t.Errorf("layer(%s) = %d, want %d", k, got[k], l)
		}
	}
	dummies := 0
	for _, v := range g.vs {
		if v.key == "" {
			dummies++
		}
	}
	if dummies != 2 {
		t.Errorf("%d dummy vertices for the long edge a->e, want 2", dummies)
	}
	// Rows stay inside the graph and keep each layer's order.
	for _, l := range g.layers {
		for i := 1; i < len(l); i++ {
			if g.vs[l[i]].row <= g.vs[l[i-1]].row {
				t.Errorf("rows out of order in a layer: %v", l)
			}
		}
		for _, v := range l {
			if r := g.vs[v].row; r < 0 || r >= g.height {
				t.Errorf("row %d outside height %d", r, g.height)
			}
		}
	}
}

func TestDAGCycleDoesNotHang(t *testing.T) {
	g := layoutDAG([]dagNode{{Key: "a", Deps: []string{"b"}}, {Key: "b", Deps: []string{"a"}}, {Key: "c", Deps: []string{"c"}}})
	if len(g.layers) == 0 {
		t.Fatal("no layers")
	}
	_ = g.render(NewStyles(true), "a")
}

func TestDAGRenderChain(t *testing.T) {
	g := layoutDAG([]dagNode{{Key: "a", State: "succeeded"}, {Key: "b", State: "running", Deps: []string{"a"}},
		{Key: "c", State: "pending", Deps: []string{"b"}}})
	d := g.render(NewStyles(true), "b")
	got := ansi.Strip(strings.Join(d.lines, "\n"))
	want := " [✓ a]-->›[● b]--> [○ c]"
	if got != want {
		t.Fatalf("chain:\n%q\nwant\n%q", got, want)
	}
	if d.selX != 10 || d.selY != 0 {
		t.Errorf("selected at %d,%d", d.selX, d.selY)
	}
}

func TestDAGRenderDiamond(t *testing.T) {
	g := layoutDAG([]dagNode{
		{Key: "extract", State: "succeeded"},
		{Key: "clean", State: "succeeded", Deps: []string{"extract"}},
		{Key: "enrich", State: "running", Deps: []string{"extract"}},
		{Key: "load", State: "pending", Deps: []string{"clean", "enrich"}},
	})
	got := ansi.Strip(strings.Join(g.render(NewStyles(true), "").lines, "\n"))
	want := strings.Join([]string{
		" [✓ extract]-+-> [✓ clean]--+-> [○ load]",
		"             +-> [● enrich]-+",
	}, "\n")
	if got != want {
		t.Fatalf("diamond:\n%s\nwant\n%s", got, want)
	}
}

func TestDAGFanOutCentersRoot(t *testing.T) {
	g := layoutDAG([]dagNode{{Key: "r"}, {Key: "x", Deps: []string{"r"}}, {Key: "y", Deps: []string{"r"}}, {Key: "z", Deps: []string{"r"}}})
	got := ansi.Strip(strings.Join(g.render(NewStyles(true), "").lines, "\n"))
	want := strings.Join([]string{
		"       +-> [? x]",
		" [? r]-+-> [? y]",
		"       +-> [? z]",
	}, "\n")
	if got != want {
		t.Fatalf("fan-out:\n%s\nwant\n%s", got, want)
	}
}
