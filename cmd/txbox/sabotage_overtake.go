//go:build txbox_sabotage_overtake

package main

import "github.com/txbox/txbox/internal/sabotage"

// A deliberately broken build: each claim's rows reach the relay in
// reverse order, so an aggregate's later events are published before its
// earlier ones. Never build releases with this tag.
func init() { relayStore = sabotage.Overtake }
