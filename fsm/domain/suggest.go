package domain

import (
	"sort"
	"strings"
)

// suggestField is the known field an unknown one most likely meant ("" for
// none): the same name in another case or spelling style (maxAttempts,
// Max-Attempts for max_attempts), else the nearest within two edits.
// Ties go to the first in sorted order, so the answer is deterministic.
func suggestField(k string, known []map[string]bool) string {
	var names []string
	for _, kn := range known {
		for n := range kn {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, n := range names {
		if fold(n) == fold(k) {
			return n
		}
	}
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(k), n); d < bestD && d < len(k) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
