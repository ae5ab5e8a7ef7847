//go:build !txbox_sabotage_ack_first

package inbox

// ackFirst is true only in a deliberately broken build (build tag
// txbox_sabotage_ack_first) that the fault harness must catch: it
// acknowledges a delivery before the inbox transaction committed.
const ackFirst = false
