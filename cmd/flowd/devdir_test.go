package main

import (
	"os"
	"path/filepath"
	"testing"
)

// flowd dev wipes --dir for a fresh start only when it made that directory
// (or it is empty or missing): a directory with other files is refused and
// left as it was.
func TestDevDirIsWipedOnlyWhenFlowdMadeIt(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "new")
	if err := prepareDevDir(fresh, false); err != nil {
		t.Fatalf("a missing dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "n1.log"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareDevDir(fresh, false); err != nil {
		t.Fatalf("a dir flowd dev made: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "n1.log")); !os.IsNotExist(err) {
		t.Fatalf("the previous dev cluster's files were kept: %v", err)
	}

	// A directory an earlier flowd dev made (no marker yet) is recognized.
	old := filepath.Join(base, "old")
	for _, d := range []string{"n1", "n2", "tls"} {
		if err := os.MkdirAll(filepath.Join(old, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(old, "n1.log"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareDevDir(old, false); err != nil {
		t.Fatalf("an earlier flowd dev's directory: %v", err)
	}

	home := filepath.Join(base, "home")
	precious := filepath.Join(home, "thesis.tex")
	if err := os.MkdirAll(home, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(precious, []byte("years of work"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareDevDir(home, false); err == nil {
		t.Fatal("a directory flowd dev did not make was accepted for wiping")
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "years of work" {
		t.Fatalf("the refused directory was changed: %q %v", b, err)
	}
	if err := prepareDevDir(home, true); err != nil {
		t.Fatalf("--keep on any directory: %v", err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatalf("--keep deleted a file: %v", err)
	}
	// --keep did not mark the directory as flowd dev's: still refused.
	if err := prepareDevDir(home, false); err == nil {
		t.Fatal("after --keep, a directory flowd dev did not make was accepted for wiping")
	}
}
