package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// parseLabelFilter reads run list's --label values, each KEY=VALUE (urfave
// splits a value at its commas: "a=1,b=2" arrives as two). Anything else —
// KEY!=VALUE, KEY==VALUE, !KEY, a bare KEY — is refused, pointing at
// --selector, rather than matching a label nobody has ("team!" = "data")
// and answering no runs.
func parseLabelFilter(cCtx *cli.Context, kvs []string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, "! \t") || strings.HasPrefix(v, "=") {
			return nil, usageErr(cCtx, "--label %q: want KEY=VALUE (every --label must match exactly); for !=, ==, !KEY or KEY use --selector, e.g. --selector '%s'",
				kv, selectorExample(kvs))
		}
		labels[k] = v
	}
	return labels, nil
}

// selectorExample is the --label values as one selector (the user's own
// terms, comma-joined again), or a generic example.
func selectorExample(kvs []string) string {
	s := strings.Join(kvs, ",")
	if strings.ContainsAny(s, "'") || s == "" {
		return "env=prod,team!=data"
	}
	return s
}
