// Package adminview holds what the CLI (cmd/txbox) and the console read and
// show alike, so that the two agree: the time bounds of their filters and
// the stored JSON they print.
package adminview
