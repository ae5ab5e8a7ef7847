package main

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	natsbroker "github.com/txbox/txbox/broker/nats"
)

// startEmbeddedNATS starts a JetStream nats-server of this module's version
// (2.15: atomic batch publish, which the 2.9 service lacks) inside the bench
// process, on a free port with its store in a temporary directory, and
// returns its URL and a stop function.
func startEmbeddedNATS() (string, func(), error) {
	dir, err := os.MkdirTemp("", "txbox-bench-nats-")
	if err != nil {
		return "", nil, err
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("embedded nats-server not ready")
	}
	stop := func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
	fmt.Printf("embedded nats-server %s at %s\n", server.VERSION, ns.ClientURL())
	return ns.ClientURL(), stop, nil
}

// natsBatch is the batch publish the bench's streams allow (`bench skew
// --nats-batch`): "fast" (allow_batched, 2.14+) and "atomic"
// (allow_atomic, 2.12+) where the server has them, as `txbox relay
// --nats-create-stream` makes streams; "atomic" or "none" to compare.
var natsBatch = "fast"

// streamBatchFlags returns the stream's allow_batched and allow_atomic for
// a server version and natsBatch.
func streamBatchFlags(version string) (fast, atomic bool) {
	hasFast, hasAtomic := natsbroker.BatchPublishSupport(version)
	fast = natsBatch == "fast" && hasFast
	atomic = (natsBatch == "fast" || natsBatch == "atomic") && hasAtomic
	return fast, atomic
}
