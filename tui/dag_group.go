package tui

import (
	"slices"
	"strings"
)

// Grouping of parallel tasks in the task graph.
//
// A wide fan-out/fan-in (a split task, twenty fetch tasks, a merge task)
// would draw twenty boxes and a thicket of edges. Tasks that are
// interchangeable in the graph (same type, same dependencies, same
// dependents) are drawn as one group node when there are at least
// groupMin of them: `[fetch ×20  ✓14 ●4 ✗2]`, its name the members'
// common key prefix (or their type), its counts by state. A group is
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
func groupCandidates(nodes []dagNode) (groups []dagGroup, member map[string]string) {
	dependents := map[string][]string{}
	for _, n := range nodes {
		for _, d := range n.Deps {
			dependents[d] = append(dependents[d], n.Key)
		}
	}
	sig := func(n dagNode) string {
		deps := slices.Clone(n.Deps)
		slices.Sort(deps)
		outs := slices.Clone(dependents[n.Key])
		slices.Sort(outs)
		return n.Type + "\x01" + strings.Join(deps, "\x02") + "\x01" + strings.Join(outs, "\x02")
	}
	bySig := map[string][]string{}
	var order []string
	for _, n := range nodes {
		s := sig(n)
		if _, ok := bySig[s]; !ok {
			order = append(order, s)
		}
		bySig[s] = append(bySig[s], n.Key)
	}
	member = map[string]string{}
	types := map[string]string{}
	for _, n := range nodes {
		types[n.Key] = n.Type
	}
	for _, s := range order {
		keys := bySig[s]
		if len(keys) < groupMin {
			continue
		}
		g := dagGroup{id: groupPrefix + keys[0], name: groupName(keys, types[keys[0]]), members: keys}
		for _, k := range keys {
			member[k] = g.id
		}
		groups = append(groups, g)
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
				continue
			}
			g := byID[gid]
			out = append(out, dagNode{Key: gid, Type: n.Type, Deps: n.Deps, Group: g.name, Members: g.members,
				States: []string{n.State}})
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
	"cancelled", "interrupted", "reverting", "reverted"}

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
