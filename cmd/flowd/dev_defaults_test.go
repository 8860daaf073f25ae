package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// `flowd ready` with no flag asks flowd dev's first agent, and flowd dev
// names every agent's metrics URL.
func TestReadyDefaultsToDevsFirstAgent(t *testing.T) {
	var ready, base string
	for _, f := range readyCommand.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "http-addr" {
			ready = sf.Value
		}
	}
	for _, f := range devCommand.Flags {
		if f, ok := f.(*cli.IntFlag); ok && f.Name == "http-base-port" {
			base = fmt.Sprint(f.Value)
		}
	}
	if ready != "127.0.0.1:"+base {
		t.Errorf("flowd ready --http-addr defaults to %q; flowd dev's n1 serves HTTP on 127.0.0.1:%s", ready, base)
	}
	if got := devHTTPLine(9101, 1); !strings.Contains(got, "flowd ready --http-addr 127.0.0.1:9101") {
		t.Errorf("flowd dev on other ports does not say how to ask them:\n%s", got)
	}
	line := devHTTPLine(9001, 3)
	for _, want := range []string{"http://127.0.0.1:9001/metrics", "http://127.0.0.1:9002/metrics", "http://127.0.0.1:9003/metrics", "/readyz"} {
		if !strings.Contains(line, want) {
			t.Errorf("flowd dev's HTTP line lacks %s:\n%s", want, line)
		}
	}
}

// make run passes ARGS on to flowd dev, and the README names every
// FLOWD_DEV_* variable of flowd dev's flags.
func TestMakeRunArgumentsAreDocumented(t *testing.T) {
	mk := readDoc(t, "../../Makefile")
	if !strings.Contains(mk, "\n\t$(BIN) dev $(ARGS)\n") {
		t.Error("Makefile: make run does not pass $(ARGS) to flowd dev")
	}
	readme := readDoc(t, "../../README.md")
	if !strings.Contains(readme, "make run ARGS=") {
		t.Error("README does not show make run ARGS=...")
	}
	for _, f := range devCommand.Flags {
		for _, env := range f.(interface{ GetEnvVars() []string }).GetEnvVars() {
			if strings.HasPrefix(env, "FLOWD_DEV_") && !strings.Contains(readme, "`"+env+"`") {
				t.Errorf("README does not name %s (flowd dev --%s)", env, f.Names()[0])
			}
		}
	}
}
