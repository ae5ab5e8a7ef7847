//go:build !linux

package main

// stdinIsTerminal: elsewhere than Linux the CLI never prompts; destructive
// commands need --yes.
func stdinIsTerminal() bool { return false }
