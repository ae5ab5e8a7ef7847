package sqlgolden

import (
	"reflect"
	"slices"
)

// Fields lists the statements a store keeps in the string fields of the
// struct queries, in their order and under their names, leaving out the
// fields named in skip (table names). A statement added to the struct is
// in the golden files without a change to the test.
func Fields(queries any, skip ...string) []Statement {
	v := reflect.ValueOf(queries)
	var out []Statement
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.String || slices.Contains(skip, f.Name) {
			continue
		}
		out = append(out, Statement{Name: f.Name, SQL: v.Field(i).String()})
	}
	return out
}
