package main

import (
	"errors"

	"github.com/txbox/txbox"
)

// Exit codes, as the README and every command's help list them.
const (
	exitOK      = 0
	exitRuntime = 1 // the work failed: database, broker, a row not found
	exitUsage   = 2 // usage or configuration: bad flag, value, command, an unmigrated database
)

// exitHelp is appended to every command's help.
const exitHelp = `
Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.
Every flag but --yes and --all can be set by its environment variable
(shown after the flag); a flag given on the command line wins.`

// usageError is a usage or configuration error whose message is complete as
// it stands (no "config FIELD:" prefix): exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == txbox.ErrConfig }

// runtimeError is a failure whose message is complete as it stands: exit 1.
type runtimeError struct{ msg string }

func (e *runtimeError) Error() string { return e.msg }

func exitCode(err error) int {
	if errors.Is(err, txbox.ErrConfig) {
		return exitUsage
	}
	return exitRuntime
}
