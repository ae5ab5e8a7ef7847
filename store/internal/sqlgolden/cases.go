package sqlgolden

import "github.com/txbox/txbox/store"

// Case is one set of store options that changes the statements: the table
// names, and whether delivered rows are deleted.
type Case struct {
	Tables     store.Tables
	DeleteSent bool
}

// Cases are the cases every store prints, by golden file: the default
// tables, DeleteSent, and custom table names, in schema unless it is empty
// (SQLite has none).
func Cases(schema string) map[string]Case {
	return map[string]Case{
		"sql_default":       {},
		"sql_delete_sent":   {DeleteSent: true},
		"sql_custom_tables": {Tables: store.Tables{Schema: schema, Outbox: "orders_out", Inbox: "orders_in"}},
	}
}
