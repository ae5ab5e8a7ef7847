//go:build txbox_sabotage_mark_first

package relay

// markFirst: see sabotage_off.go. Never build releases with this tag.
const markFirst = true
