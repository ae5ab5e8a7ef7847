//go:build txbox_sabotage_mark_first

package main

import "github.com/txbox/txbox/internal/sabotage"

// A deliberately broken build: the relay's claims are marked SENT before
// the broker confirmed them. Never build releases with this tag.
func init() { relayStore = sabotage.MarkFirst }
