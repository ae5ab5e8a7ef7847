//go:build !txbox_sabotage_mark_first

package relay

// markFirst is true only in a deliberately broken build (build tag
// txbox_sabotage_mark_first) that the fault harness must catch: it marks
// rows SENT before the broker confirmed them, the bug of abp#24340.
const markFirst = false
