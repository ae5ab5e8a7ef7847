package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// ConnectionLost recognises the net package's errors by their types' names
// (the package is not imported), wrapped and joined too, and nothing that
// merely looks like one.
func TestConnectionLost(t *testing.T) {
	op := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route")}
	dns := &net.DNSError{Err: "no such host", Name: "db.example"}
	for _, err := range []error{
		op, dns, fmt.Errorf("connect: %w", op), errors.Join(errors.New("x"), fmt.Errorf("y: %w", dns)),
		driver.ErrBadConn, fmt.Errorf("write: %w", &os.SyscallError{Syscall: "write", Err: syscall.EPIPE}), syscall.ECONNREFUSED,
	} {
		if !ConnectionLost(err) {
			t.Errorf("ConnectionLost(%v) = false", err)
		}
	}
	type OpError struct{ error } // same name, not package net
	for _, err := range []error{
		nil, io.EOF, io.ErrUnexpectedEOF, context.DeadlineExceeded, fmt.Errorf("x: %w", context.DeadlineExceeded),
		errors.New("duplicate key"), &OpError{errors.New("x")}, errors.Join(errors.New("a"), errors.New("b")),
	} {
		if ConnectionLost(err) {
			t.Errorf("ConnectionLost(%v) = true", err)
		}
	}
}
