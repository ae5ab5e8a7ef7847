package sqlstore

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

// Migration is one versioned schema step of a dialect, rendered for its
// table names.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads dir of fsys (files named NNN_what.sql), renders each
// as a text/template over vars (a missing key is an error, so a typo cannot
// produce SQL with an empty table name), and returns them by version.
func LoadMigrations(fsys fs.FS, dir string, vars map[string]string) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range ents {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its version number", e.Name())
		}
		raw, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, vars); err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: n, Name: e.Name(), SQL: b.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
