package tui

import (
	"slices"
	"strconv"
	"strings"
)

// Grouping of parallel tasks in the task graph.
//
// A wide fan-out/fan-in (a split task, twenty fetch tasks, a merge task)
// would draw twenty boxes and a thicket of edges. Tasks that are
// interchangeable in the graph (same type and layer, depending on and
// depended on by the same groups of tasks: see groupCandidates) are drawn
// as one group node when there are at least groupMin of them:
// `[fetch ×20  ✓14 ●4 ✗2]`, its name the members' common key prefix (or
// their type), its counts by state, its edges the union of its members'.
// A group is
// expanded (its members drawn one by one) with enter on the graph, and
// collapsed again with space on any member. Grouping happens before the
// layout, so the layout code knows a group only as one vertex with a
// longer label.

// groupMin is the smallest set of parallel tasks drawn as a group.
const groupMin = 4

// groupPrefix marks a group's key (task keys cannot start with it).
const groupPrefix = "\x00group:"

// dagGroup is a set of interchangeable tasks.
type dagGroup struct {
	id      string   // groupPrefix + the first member's key
	name    string   // common key prefix, or the type
	members []string // task keys, in run order
}

// groupCandidates finds every set of interchangeable tasks (at least
// groupMin), in the order of their first member; member maps each task key
// to its group's id.
//
// Interchangeable is a partition refinement: tasks start in classes by
// type and layer, and a class splits until all its members depend on the
// same set of classes and are depended on by the same set of classes. So
// twenty fetch tasks between a split and a merge form one class, and so do
// twenty fetch -> parse chains (one class of fetches, one of parses).
func groupCandidates(nodes []dagNode) (groups []dagGroup, member map[string]string) {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if _, dup := idx[n.Key]; !dup {
			idx[n.Key] = i
		}
	}
	deps := make([][]int, len(nodes))
	outs := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, d := range n.Deps {
			if j, ok := idx[d]; ok && j != i {
				deps[i] = append(deps[i], j)
				outs[j] = append(outs[j], i)
			}
		}
	}
	g := &dag{vs: make([]vertex, len(nodes))} // only the layers: no full layout
	g.assignLayers(deps)
	layers := 0
	for _, v := range g.vs {
		layers = max(layers, v.layer+1)
	}
	class := make([]int, len(nodes))
	classes := func(key func(i int) string) int {
		ids := map[string]int{}
		next := make([]int, len(nodes))
		for i := range nodes {
			k := key(i)
			id, ok := ids[k]
			if !ok {
				id = len(ids)
				ids[k] = id
			}
			next[i] = id
		}
		copy(class, next)
		return len(ids)
	}
	n := classes(func(i int) string {
		return nodes[i].Type + "\x01" + itoa(g.vs[i].layer) + "\x01" + strconv.FormatBool(nodes[i].Finally)
	})
	set := func(of []int) string {
		cs := make([]int, len(of))
		for j, v := range of {
			cs[j] = class[v]
		}
		slices.Sort(cs)
		var b strings.Builder
		for j, c := range slices.Compact(cs) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(itoa(c))
		}
		return b.String()
	}
	for range 2*layers + 2 {
		m := classes(func(i int) string { return itoa(class[i]) + "|" + set(deps[i]) + "|" + set(outs[i]) })
		if m == n {
			break
		}
		n = m
	}
	byClass := map[int][]string{}
	var order []int
	for i, nd := range nodes {
		if idx[nd.Key] != i {
			continue // a duplicate key
		}
		c := class[i]
		if _, ok := byClass[c]; !ok {
			order = append(order, c)
		}
		byClass[c] = append(byClass[c], nd.Key)
	}
	member = map[string]string{}
	for _, c := range order {
		keys := byClass[c]
		if len(keys) < groupMin {
			continue
		}
		gr := dagGroup{id: groupPrefix + keys[0], name: groupName(keys, nodes[idx[keys[0]]].Type), members: keys}
		for _, k := range keys {
			member[k] = gr.id
		}
		groups = append(groups, gr)
	}
	return groups, member
}

// groupName is the members' common key prefix without trailing digits
// and separators ("fetch-01".."fetch-20" -> "fetch"), else their type.
func groupName(keys []string, typ string) string {
	p := keys[0]
	for _, k := range keys[1:] {
		for !strings.HasPrefix(k, p) {
			p = p[:len(p)-1]
		}
	}
	p = strings.TrimRight(p, "0123456789-_.:/[")
	switch {
	case p != "":
		return p
	case typ != "":
		return typ
	}
	return keys[0]
}

// collapse replaces the members of every group not in expanded by one
// node; dependencies on a member become dependencies on its group.
func collapse(nodes []dagNode, groups []dagGroup, member map[string]string, expanded map[string]bool) []dagNode {
	if len(groups) == 0 {
		return nodes
	}
	folded := map[string]int{} // group id -> index in out
	byID := map[string]dagGroup{}
	for _, g := range groups {
		if !expanded[g.id] {
			byID[g.id] = g
		}
	}
	out := make([]dagNode, 0, len(nodes))
	for _, n := range nodes {
		gid, ok := member[n.Key]
		if _, folding := byID[gid]; ok && folding {
			if i, seen := folded[gid]; seen {
				out[i].States = append(out[i].States, n.State)
				out[i].Deps = append(out[i].Deps, n.Deps...) // deduplicated below
				continue
			}
			g := byID[gid]
			out = append(out, dagNode{Key: gid, Type: n.Type, Deps: slices.Clone(n.Deps), Group: g.name, Members: g.members,
				States: []string{n.State}, Finally: n.Finally})
			folded[gid] = len(out) - 1
			continue
		}
		out = append(out, n)
	}
	for i := range out {
		var deps []string
		for _, d := range out[i].Deps {
			if gid, ok := member[d]; ok {
				if _, seen := folded[gid]; seen {
					d = gid
				}
			}
			if d == out[i].Key {
				continue
			}
			if !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
		out[i].Deps = deps
	}
	for _, i := range folded {
		out[i].State = groupState(out[i].States)
	}
	return out
}

// groupState is the state a group is painted in: failed if any member
// failed, else running (or retrying) if any is, else succeeded if all
// did, else the first member's state that is not succeeded.
func groupState(states []string) string {
	for _, want := range []string{"failed", "running", "retrying"} {
		if slices.Contains(states, want) {
			return want
		}
	}
	for _, s := range states {
		if s != "succeeded" {
			return s
		}
	}
	return "succeeded"
}

// groupStateOrder is the order of the counts in a group's label.
var groupStateOrder = []string{"succeeded", "running", "retrying", "ready", "pending", "failed",
	"skipped", "cancelled", "interrupted", "reverting", "reverted"}

// groupLabel is "fetch ×20  ✓14 ●4 ✗2" (the name cut to fit).
func groupLabel(name string, states []string) string {
	count := map[string]int{}
	for _, s := range states {
		count[s]++
	}
	var parts []string
	for _, s := range groupStateOrder {
		if n := count[s]; n > 0 {
			parts = append(parts, stateGlyph(s)+itoa(n))
			delete(count, s)
		}
	}
	var rest []string
	for s := range count {
		rest = append(rest, s)
	}
	slices.Sort(rest)
	for _, s := range rest {
		parts = append(parts, stateGlyph(s)+itoa(count[s]))
	}
	return fit(name, 16) + " ×" + itoa(len(states)) + "  " + strings.Join(parts, " ")
}
