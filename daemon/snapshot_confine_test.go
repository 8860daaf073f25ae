package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// snapshot.save and snapshot.restore touch only --snapshot-dir: file names,
// never paths; save never replaces a file; restore follows no link.
func TestSnapshotConfinedToItsDirectory(t *testing.T) {
	a, _ := oneNodeAgent(t)
	root := t.TempDir()
	dir := filepath.Join(root, "snaps")
	a.cfg.SnapshotDir = dir
	ctx := context.Background()
	outside := filepath.Join(root, "outside")
	if err := os.WriteFile(outside, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}

	wantInvalid := func(t *testing.T, err error, substr ...string) {
		t.Helper()
		if !errors.Is(err, domain.ErrInvalidArgument) {
			t.Fatalf("err = %v, want invalid_params", err)
		}
		for _, s := range substr {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("err = %q, want it to contain %q", err, s)
			}
		}
	}

	// Paths are refused before anything is touched, with the same answer
	// whether or not the file outside exists.
	for _, p := range []string{"", "../outside", "../nonexistent", outside, filepath.Join(root, "nonexistent"),
		"/etc/passwd", "a/b", ".", "..", "x\x00y", `a\b`, strings.Repeat("x", 256)} {
		_, err := a.snapshotSave(ctx, rpc.SnapshotParams{Path: p})
		wantInvalid(t, err, "snapshot.save writes only inside --snapshot-dir "+dir, "pass a file name")
		_, err = a.snapshotRestore(ctx, rpc.SnapshotParams{Path: p})
		wantInvalid(t, err, "snapshot.restore reads only inside --snapshot-dir "+dir, "pass a file name")
		for _, leak := range []string{"already exists", "no such", "no snapshot", "denied", "symbolic", "regular"} {
			if strings.Contains(err.Error(), leak) {
				t.Fatalf("%q: the answer talks about the filesystem: %v", p, err)
			}
		}
	}
	_, errA := a.snapshotSave(ctx, rpc.SnapshotParams{Path: outside})
	_, errB := a.snapshotSave(ctx, rpc.SnapshotParams{Path: filepath.Join(root, "nonexistent")})
	if strings.ReplaceAll(errA.Error(), "outside", "X") != strings.ReplaceAll(errB.Error(), "nonexistent", "X") {
		t.Fatalf("answers differ for an existing and a missing file outside:\n%v\n%v", errA, errB)
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Fatal("the file outside was changed")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused call created the directory: %v", err)
	}

	// A file name works: created 0600 in a 0700 directory.
	res, err := a.snapshotSave(ctx, rpc.SnapshotParams{Path: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != filepath.Join(dir, "s1") || res.Bytes == 0 {
		t.Fatalf("result %+v", res)
	}
	st, err := os.Stat(res.Path)
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != res.Bytes {
		t.Fatalf("saved file: %v %v", st.Mode(), err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", st.Mode())
	}

	// A second save to the same name is refused and leaves the file alone.
	before, _ := os.ReadFile(res.Path)
	_, err = a.snapshotSave(ctx, rpc.SnapshotParams{Path: "s1"})
	wantInvalid(t, err, "already exists", "pass a new file name")
	if after, _ := os.ReadFile(res.Path); string(after) != string(before) {
		t.Fatal("the existing snapshot was changed")
	}

	// A link planted in the directory: save does not write through it,
	// restore does not read through it.
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, err = a.snapshotSave(ctx, rpc.SnapshotParams{Path: "link"})
	wantInvalid(t, err, "already exists")
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Fatal("save wrote through a symbolic link")
	}
	_, err = a.snapshotRestore(ctx, rpc.SnapshotParams{Path: "link"})
	wantInvalid(t, err, "symbolic link", "copy the snapshot into the directory")
	// A dangling link is refused the same way (not "no such file").
	_ = os.Symlink(filepath.Join(root, "nonexistent"), filepath.Join(dir, "dangling"))
	_, err = a.snapshotRestore(ctx, rpc.SnapshotParams{Path: "dangling"})
	wantInvalid(t, err, "symbolic link")

	// Missing files, FIFOs and non-snapshots in the directory.
	_, err = a.snapshotRestore(ctx, rpc.SnapshotParams{Path: "nope"})
	wantInvalid(t, err, `no snapshot "nope" in --snapshot-dir `+dir, "copy the file there")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = a.snapshotRestore(ctx, rpc.SnapshotParams{Path: "fifo"})
	wantInvalid(t, err, "not a regular file")
	_ = os.WriteFile(filepath.Join(dir, "junk"), []byte("not a snapshot"), 0o600)
	_, err = a.snapshotRestore(ctx, rpc.SnapshotParams{Path: "junk"})
	wantInvalid(t, err, "bad snapshot")

	// No directory configured: disabled, and says how to enable it.
	a.cfg.SnapshotDir = ""
	_, err = a.snapshotSave(ctx, rpc.SnapshotParams{Path: "s2"})
	wantInvalid(t, err, "--snapshot-dir")
}
