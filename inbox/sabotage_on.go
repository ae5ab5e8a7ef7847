//go:build txbox_sabotage_ack_first

package inbox

// ackFirst: see sabotage_off.go. Never build releases with this tag.
const ackFirst = true
