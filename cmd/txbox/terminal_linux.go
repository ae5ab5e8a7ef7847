package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdinIsTerminal reports whether a person may be typing: /dev/null is a
// character device too, so the mode bits are not enough; a terminal answers
// the termios ioctl.
func stdinIsTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}
