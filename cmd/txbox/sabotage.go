package main

import "github.com/txbox/txbox/store"

// relayStore is the store `txbox relay` hands the relay: s itself, except
// in the deliberately broken build the fault harness must catch
// (sabotage_mark_first.go, build tag txbox_sabotage_mark_first).
var relayStore = func(s store.Store) store.Store { return s }
