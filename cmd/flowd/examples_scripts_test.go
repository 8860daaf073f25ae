package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The example scripts run after `make run` without flowd on the PATH:
// they call $FLOWD, else the checkout's bin/flowd, from the checkout's
// root whatever the working directory. A stub bin/flowd records the calls.
func TestExampleScriptsUseTheCheckoutsBinary(t *testing.T) {
	scripts, err := filepath.Glob("../../examples/workflows/*.sh")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no example scripts: %v", err)
	}
	bare := regexp.MustCompile(`(?m)^\s*flowd\s`)
	for _, src := range scripts {
		name := filepath.Base(src)
		body, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if m := bare.Find(body); m != nil {
			t.Errorf("%s calls flowd from the PATH: %q (use \"$FLOWD\")", name, m)
		}
		calls := strings.Count(string(body), `"$FLOWD" `)
		if calls == 0 {
			t.Errorf("%s never calls \"$FLOWD\"", name)
			continue
		}
		root := t.TempDir()
		wf := filepath.Join(root, "examples", "workflows")
		if err := os.MkdirAll(wf, 0o755); err != nil {
			t.Fatal(err)
		}
		all, _ := filepath.Glob("../../examples/workflows/*")
		for _, f := range all {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(wf, filepath.Base(f)), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		log := filepath.Join(root, "calls")
		// The stub records its arguments; a file under examples/ it is
		// given must exist from where the script runs it.
		stub := "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in examples/*) [ -f \"$a\" ] || { echo \"no such file: $a\" >&2; exit 1; };; esac; done\n" +
			"echo \"$*\" >> " + log + "\n"
		if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "bin", "flowd"), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", filepath.Join(wf, name))
		cmd.Dir = t.TempDir() // not the checkout: the script finds its root
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + root, "TMPDIR=" + root}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s without flowd on the PATH: %v\n%s", name, err, out)
			continue
		}
		got, _ := os.ReadFile(log)
		if n := strings.Count(string(got), "\n"); n == 0 {
			t.Errorf("%s: bin/flowd was not called:\n%s", name, out)
		}
	}
}
