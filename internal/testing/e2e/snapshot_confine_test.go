package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Snapshots stay inside --snapshot-dir (issue 11), against a real agent
// process through the real CLI: paths are refused, a name lands in the
// directory (0600 in 0700), a second save of the name is refused (O_EXCL),
// restore does not follow a symbolic link, and each call is audited.
func TestSnapshotConfinedToSnapshotDir(t *testing.T) {
	c := startCluster(t, 1)
	a := c.agents[0]
	dir := filepath.Join(a.dir, "snapshots") // the default, DATA_DIR/snapshots
	flowd := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(flowdBin, append([]string{"--addr", "unix://" + a.sock, "--timeout", "20s"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	refused := func(out string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("accepted:\n%s", out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("want %q in:\n%s", w, out)
			}
		}
	}

	outside := filepath.Join(t.TempDir(), "x")
	for _, p := range []string{"../x", "/etc/x", outside, "sub/x"} {
		out, err := flowd("snapshot", "save", p)
		refused(out, err, "snapshot.save writes only inside --snapshot-dir "+dir, "pass a file name", "-32602")
	}
	for _, p := range []string{"/etc/x", outside} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s was created (%v)", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(a.dir, "x")); !os.IsNotExist(err) {
		t.Fatalf("../x was created")
	}
	out, err := flowd("snapshot", "restore", "/etc/passwd")
	refused(out, err, "snapshot.restore reads only inside --snapshot-dir "+dir)

	// A name works and lands in the directory.
	out, err = flowd("snapshot", "save", "s1")
	if err != nil || !strings.Contains(out, filepath.Join(dir, "s1")) {
		t.Fatalf("save s1: %v\n%s", err, out)
	}
	st, err := os.Stat(filepath.Join(dir, "s1"))
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() == 0 {
		t.Fatalf("s1: %v %v", st, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("snapshot dir: %v %v", st, err)
	}

	// A second save to the same name is refused (O_EXCL).
	out, err = flowd("snapshot", "save", "s1")
	refused(out, err, "already exists", "pass a new file name")

	// Restore of a symbolic link is refused, even one pointing at a real
	// snapshot in the directory.
	if err := os.Symlink(filepath.Join(dir, "s1"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	out, err = flowd("snapshot", "restore", "link")
	refused(out, err, "symbolic link")

	// The real file restores.
	out, err = flowd("snapshot", "restore", "s1")
	if err != nil || !strings.Contains(out, "restored") {
		t.Fatalf("restore s1: %v\n%s", err, out)
	}

	// Each of those admin calls is in the audit log, with the caller's uid.
	log, _ := os.ReadFile(a.dir + ".log")
	var saves, restores int
	for _, l := range strings.Split(string(log), "\n") {
		if !strings.Contains(l, "audit") || !strings.Contains(l, "uid=") {
			continue
		}
		switch {
		case strings.Contains(l, "method=snapshot.save"):
			saves++
		case strings.Contains(l, "method=snapshot.restore"):
			restores++
		}
	}
	if saves != 6 || restores != 3 {
		t.Fatalf("audit entries: %d saves (want 6), %d restores (want 3)\n%s", saves, restores, tail(string(log), 30))
	}
}
