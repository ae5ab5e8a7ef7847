package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// api.txt lists the public API as it is: a change to the API shows in
// review as a change to api.txt.
func TestAPITxtCurrent(t *testing.T) {
	got, err := dump("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../api.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var added, removed []string
	for _, l := range got {
		if !slices.Contains(want, l) {
			added = append(added, "+ "+l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			removed = append(removed, "- "+l)
		}
	}
	if len(added)+len(removed) > 0 || len(got) != len(want) {
		t.Fatalf("api.txt is stale; if the API change is intended, run `go run ./internal/apidump > api.txt`:\n%s",
			strings.Join(append(removed, added...), "\n"))
	}
}

// The dump notices a new export, and lists exported names only.
func TestDumpNoticesNewExport(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "widget")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package widget\n\nfunc hidden() {}\n\ntype T struct {\n\tA int\n\tb int\n}\n\nfunc (T) Get() int { return 0 }\n"
	write := func() []string {
		if err := os.WriteFile(filepath.Join(pkg, "w.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		lines, err := dump(dir)
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	before := write()
	want := []string{
		module + "/widget: field T.A int",
		module + "/widget: method (T) Get() int",
		module + "/widget: type T struct",
	}
	if !slices.Equal(before, want) {
		t.Fatalf("dump = %q, want %q", before, want)
	}
	src += "\n// New is a new export.\nfunc New(name string) (*T, error) { return nil, nil }\n"
	after := write()
	if !slices.Contains(after, module+"/widget: func New(name string) (*T, error)") || len(after) != len(before)+1 {
		t.Fatalf("new export not noticed: %q", after)
	}
}
