package main_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideDocs matches references to documents a user of txbox does not
// have: the design notes the project was built from. (The pattern is
// split so that this file does not match itself.)
var outsideDocs = regexp.MustCompile(`(?i)\bseed` + ` 0\d\d\b|DESIGN` + `\.md`)

// No Go file (package docs, comments, errors, help) points its reader at a
// document outside the repository.
func TestNoReferencesToOutsideDocumentsInCode(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "results") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if outsideDocs.MatchString(line) {
				t.Errorf("%s:%d refers to a document users do not have: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// No --help output of any command does either.
func TestNoReferencesToOutsideDocumentsInHelp(t *testing.T) {
	seen := walkHelp(t, func(args []string, out string) {
		if m := outsideDocs.FindString(out); m != "" {
			t.Errorf("txbox %v --help mentions %q", args, m)
		}
	})
	if len(seen) < 8 {
		t.Fatalf("walked only %d commands: %v", len(seen), seen)
	}
}
