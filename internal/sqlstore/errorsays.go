package sqlstore

import "strings"

// ErrorSays reports whether err's text holds one of words: how code that
// knows no driver's error type recognises a database's error in each
// dialect (a SQLSTATE, a MySQL error number, SQLite's words).
func ErrorSays(err error, words ...string) bool {
	msg := err.Error()
	for _, w := range words {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
