package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd units in examples/deploy/systemd parse and keep their
// hardening: every unit has the keys below (systemd-analyze verify, where
// the machine has it, checks the rest; ExecStart is pointed at a binary
// that exists, since verify insists on one).
func TestSystemdUnits(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "deploy", "systemd")
	units, _ := filepath.Glob(filepath.Join(dir, "*.service"))
	if len(units) < 2 {
		t.Fatalf("want the agent and worker units in %s, found %v", dir, units)
	}
	required := map[string]string{
		"Service.User": "", "Service.ExecStart": "", "Service.NoNewPrivileges": "yes", "Service.ProtectSystem": "strict",
		"Service.PrivateTmp": "yes", "Service.ProtectHome": "yes", "Service.ReadWritePaths": "", "Service.CapabilityBoundingSet": "",
		"Service.Restart": "on-failure", "Install.WantedBy": "multi-user.target", "Unit.Description": "",
	}
	verify, _ := exec.LookPath("systemd-analyze")
	tmp := t.TempDir()
	for _, u := range units {
		keys := parseUnit(t, u)
		for k, want := range required {
			got, ok := keys[k]
			if !ok || (want != "" && got != want) {
				t.Errorf("%s: %s = %q (set %v), want %q", filepath.Base(u), k, got, ok, want)
			}
		}
		if user := keys["Service.User"]; user == "root" || user == "0" {
			t.Errorf("%s runs as root", filepath.Base(u))
		}
		if verify == "" {
			continue
		}
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "/usr/local/bin/flowd", "/bin/true")
		name := filepath.Base(u)
		name = strings.Replace(name, "@", "@test", 1) // a template: verify wants an instance
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(verify, "verify", "--man=no", p).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
}

// parseUnit reads a unit file into "Section.Key" -> last value.
func parseUnit(t *testing.T, path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			keys[section+"."+strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return keys
}
