// Package loopback tells whether an address names this machine only: the
// console serves without a token or TLS only there, and the CLI refuses to
// start it elsewhere without them.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host (a name or an IP, without port) names this
// machine only: localhost, *.localhost, 127.0.0.0/8 or ::1.
func Host(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
