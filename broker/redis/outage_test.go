package redisbroker_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	redisbroker "github.com/txbox/txbox/broker/redis"
	"github.com/txbox/txbox/internal/testenv"
)

// TestServerRefusalsAreOutages: on a redis-server of the test's own, each
// refusal the server sends back for a state of its own or of the key (a
// key of another type, the ACL, out of memory, a read-only replica) fails
// the event as an outage naming the cause, and the same event is confirmed
// once the state is fixed.
func TestServerRefusalsAreOutages(t *testing.T) {
	srv := testenv.StartRedis(t)
	adm := admin(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	do := func(args ...any) {
		t.Helper()
		if err := adm.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	// A user that may write only keys under "allowed:".
	do("ACL", "SETUSER", "relay", "on", ">relay-pw", "~allowed:*", "+@all")
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("relay", "relay-pw")
	p := adaptertest.Open(t, redisbroker.Open, u.String(), redisbroker.Options{})

	cases := []struct {
		name, topic string
		text        string
		cause, fix  func()
	}{
		{"a key of another type", "allowed:string", "not a stream",
			func() { do("SET", "allowed:string", "x") }, func() { do("DEL", "allowed:string") }},
		{"the ACL", "denied:x", "ACL forbids",
			func() {}, func() { do("ACL", "SETUSER", "relay", "~*") }},
		{"out of memory", "allowed:oom", "OOM",
			func() { do("CONFIG", "SET", "maxmemory-policy", "noeviction"); do("CONFIG", "SET", "maxmemory", "1") },
			func() { do("CONFIG", "SET", "maxmemory", "0") }},
		{"a read-only replica", "allowed:ro", "READONLY",
			func() { do("REPLICAOF", "127.0.0.1", testenv.FreePort(t)) }, func() { do("REPLICAOF", "NO", "ONE") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cause()
			m := adaptertest.Msg(c.topic, "k", 0)
			err := p.Publish(ctx, []broker.Message{m})[0]
			switch {
			case !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent):
				t.Errorf("err = %v, want one wrapping txbox.ErrBrokerUnavailable and not txbox.ErrPermanent", err)
			case !strings.Contains(err.Error(), c.text):
				t.Errorf("err = %v, want it to mention %q", err, c.text)
			default:
				t.Logf("%v", err)
			}
			c.fix()
			if err := p.Publish(ctx, []broker.Message{m})[0]; err != nil {
				t.Errorf("once fixed: %v", err)
			}
		})
	}
}
