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
	seen := map[string]bool{}
	var walk func(args []string)
	walk = func(args []string) {
		out, code := run(t, nil, append(args, "--help")...)
		if code != 0 {
			t.Fatalf("txbox %v --help: exit %d\n%s", args, code, out)
		}
		if m := outsideDocs.FindString(out); m != "" {
			t.Errorf("txbox %v --help mentions %q", args, m)
		}
		_, cmds, ok := strings.Cut(out, "Available Commands:\n")
		if !ok {
			return
		}
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		for _, l := range strings.Split(cmds, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] == "help" || f[0] == "completion" {
				continue
			}
			sub := append(append([]string(nil), args...), f[0])
			if k := strings.Join(sub, " "); !seen[k] {
				seen[k] = true
				walk(sub)
			}
		}
	}
	walk(nil)
	if len(seen) < 8 {
		t.Fatalf("walked only %d commands: %v", len(seen), seen)
	}
}
