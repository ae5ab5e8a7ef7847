// Package sqltemplate renders a store's statements from embedded .sql files.
//
// Each file is a text/template whose output is one statement, or a set of
// {{define}}d parts that several statements share. The data filled in are
// the names and parameters that vary ({{.Table}}); functions fill in the
// named fragments that take a row alias ({{unsent "e"}}). {{/* comments */}}
// say what a statement does and are not part of it, nor is a file's final
// newline.
package sqltemplate

import (
	"fmt"
	"io/fs"
	"strings"
	"text/template"
)

// Set is the parsed statement files of one store.
type Set struct{ t *template.Template }

// Must parses the files of fsys that match pattern, with funcs available
// to them; it panics on an error, as the files are part of the program.
func Must(fsys fs.FS, pattern string, funcs template.FuncMap) Set {
	return Set{template.Must(template.New("").Funcs(funcs).ParseFS(fsys, pattern))}
}

// Render fills in the statement of file (its base name) with data. It
// panics on an error: the templates are fixed, so an error is a bug, and
// each store's golden test renders every statement.
func (s Set) Render(file string, data any) string {
	var b strings.Builder
	if err := s.t.ExecuteTemplate(&b, file, data); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Deliverable is the SQL test of whether the row alias may be claimed at
// now (an SQL expression): PENDING, a RETRY due, or PROCESSING with its
// lease run out. It is NULL for a RETRY or PROCESSING row without
// next_retry_at or locked_until (written by hand), which a claim must read
// as false.
func Deliverable(alias, now string) string {
	return fmt.Sprintf(`(%[1]s.status = 'PENDING'
	OR (%[1]s.status = 'RETRY' AND %[1]s.next_retry_at <= %[2]s)
	OR (%[1]s.status = 'PROCESSING' AND %[1]s.locked_until <= %[2]s))`, alias, now)
}
