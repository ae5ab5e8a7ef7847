package mqttbroker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	mqttbroker "github.com/txbox/txbox/broker/mqtt"
	"github.com/txbox/txbox/internal/testenv"
)

// fakeBroker is an MQTT 5 server of the test's own that answers each QoS 1
// PUBLISH with the PUBACK reason code reasons gives for its topic (success
// for a topic not there), and each CONNECT with connack.
type fakeBroker struct {
	ln      net.Listener
	reasons map[string]byte
	connack atomic.Uint32 // reason code of the next CONNACKs
	mu      sync.Mutex
	conns   []net.Conn
}

func startFakeBroker(t *testing.T, reasons map[string]byte) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln, reasons: reasons}
	t.Cleanup(func() { _ = ln.Close(); b.drop() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			go b.serve(c)
		}
	}()
	return b
}

func (b *fakeBroker) url() string { return "mqtt://" + b.ln.Addr().String() }

// drop closes every connection, as a broker restart would.
func (b *fakeBroker) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
}

func (b *fakeBroker) serve(c net.Conn) {
	defer c.Close()
	for {
		cp, err := packets.ReadPacket(c)
		if err != nil {
			return
		}
		switch p := cp.Content.(type) {
		case *packets.Connect:
			ca := packets.NewControlPacket(packets.CONNACK)
			ca.Content.(*packets.Connack).ReasonCode = byte(b.connack.Load())
			ca.Content.(*packets.Connack).Properties = &packets.Properties{}
			if _, err := ca.WriteTo(c); err != nil || b.connack.Load() != 0 {
				return
			}
		case *packets.Publish:
			if p.QoS == 0 {
				continue
			}
			pa := packets.NewControlPacket(packets.PUBACK)
			pa.Content.(*packets.Puback).PacketID = p.PacketID
			pa.Content.(*packets.Puback).ReasonCode = b.reasons[p.Topic]
			pa.Content.(*packets.Puback).Properties = &packets.Properties{}
			if _, err := pa.WriteTo(c); err != nil {
				return
			}
		case *packets.Pingreq:
			if _, err := packets.NewControlPacket(packets.PINGRESP).WriteTo(c); err != nil {
				return
			}
		case *packets.Disconnect:
			return
		}
	}
}

// TestPubackReasonsClassified: each PUBACK reason code lands in its class.
// The topic, the bytes or their format refused are the event's failure
// (DEAD at once); the ACL, a quota, the broker's own state are outages
// (no attempt spent); an unspecified or implementation-specific refusal
// may be either, and spends an attempt.
func TestPubackReasonsClassified(t *testing.T) {
	const (
		permanent = "permanent"
		outage    = "outage"
		attempt   = "attempt"
	)
	cases := []struct {
		rc    byte
		class string
	}{
		{0x00, ""}, {0x10, ""},
		{0x90, permanent}, {0x95, permanent}, {0x99, permanent},
		{0x87, outage}, {0x97, outage}, {0x91, outage}, {0x89, outage}, {0x88, outage},
		{0x80, attempt}, {0x83, attempt},
	}
	reasons := map[string]byte{}
	var msgs []broker.Message
	for i, c := range cases {
		topic := fmt.Sprintf("rc/%02x", c.rc)
		reasons[topic] = c.rc
		msgs = append(msgs, adaptertest.Msg(topic, fmt.Sprint("k", i), i))
	}
	b := startFakeBroker(t, reasons)
	p := adaptertest.Open(t, mqttbroker.Open, b.url(), mqttbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	for i, c := range cases {
		err := errs[i]
		var got string
		switch {
		case err == nil:
		case errors.Is(err, txbox.ErrPermanent) && errors.Is(err, txbox.ErrBrokerUnavailable):
			got = "both"
		case errors.Is(err, txbox.ErrPermanent):
			got = permanent
		case errors.Is(err, txbox.ErrBrokerUnavailable):
			got = outage
		default:
			got = attempt
		}
		if got != c.class {
			t.Errorf("PUBACK 0x%02x: %v: class %q, want %q", c.rc, err, got, c.class)
		} else if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("PUBACK reason 0x%02x", c.rc)) {
			t.Errorf("PUBACK 0x%02x: %v, want the reason code in the text", c.rc, err)
		}
	}
}

// TestConnectRefusedOnReconnectIsOutage: a CONNECT refused at Open is a
// configuration error; refused when the publisher reconnects (credentials
// changed, client banned) it stops the way out, not the event: an outage,
// gone once the broker takes the connection again.
func TestConnectRefusedOnReconnectIsOutage(t *testing.T) {
	b := startFakeBroker(t, nil)
	p := adaptertest.Open(t, mqttbroker.Open, b.url(), mqttbroker.Options{Connection: mqttbroker.Connection{ConnectTimeout: 2 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := adaptertest.Msg("x/y", "k", 0)
	adaptertest.PublishOK(ctx, t, p, []broker.Message{m})
	b.connack.Store(packets.ConnackBadUsernameOrPassword)
	b.drop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := p.Publish(ctx, []broker.Message{m})[0]
		if !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent) {
			t.Fatalf("with the CONNECT refused: %v, want an outage", err)
		}
		if strings.Contains(err.Error(), "CONNACK reason 0x86") {
			t.Logf("%v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CONNACK refusal seen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.connack.Store(0)
	if err := p.Publish(ctx, []broker.Message{m})[0]; err != nil {
		t.Fatalf("once the broker takes the connection: %v", err)
	}
}

// TestNotAuthorizedIsOutage: a Mosquitto of the test's own whose ACL does
// not let the publisher write the topic refuses the publish: an outage,
// gone once the ACL allows it (a restart with the new file). The PUBACK
// code itself is checked against every reason in the fake server's test.
func TestNotAuthorizedIsOutage(t *testing.T) {
	// Mosquitto, running as its own user, reads the ACL file.
	acl := filepath.Join(testenv.SharedDir(t, "txbox-mqtt-acl-", 0o755), "acl")
	writeACL := func(rules string) {
		t.Helper()
		if err := os.WriteFile(acl, []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeACL("topic readwrite txboxtest/allowed/#\n")
	srv := testenv.StartMosquitto(t, "acl_file "+acl)
	p := adaptertest.Open(t, mqttbroker.Open, srv.URL, mqttbroker.Options{Connection: mqttbroker.Connection{ConnectTimeout: 2 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := adaptertest.Msg("txboxtest/denied/Order/Created", "k", 0)
	errs := p.Publish(ctx, []broker.Message{adaptertest.Msg("txboxtest/allowed/x", "a", 0), m})
	if errs[0] != nil {
		t.Fatalf("allowed topic: %v", errs[0])
	}
	err := errs[1]
	// Mosquitto 2.0 answers the denied publish with PUBACK 0x87 or, as
	// often here, drops the connection instead: an outage either way.
	if !errors.Is(err, txbox.ErrBrokerUnavailable) || errors.Is(err, txbox.ErrPermanent) ||
		!strings.Contains(err.Error(), "0x87") && !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("topic the ACL denies: %v, want an outage naming PUBACK 0x87 or the lost connection", err)
	}
	t.Logf("%v", err)

	writeACL("topic readwrite txboxtest/#\n")
	srv.Stop()
	srv.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.Publish(ctx, []broker.Message{m})[0]
		if err == nil {
			return
		}
		if !errors.Is(err, txbox.ErrBrokerUnavailable) || time.Now().After(deadline) {
			t.Fatalf("once the ACL allows it: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
