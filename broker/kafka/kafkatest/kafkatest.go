// Package kafkatest runs a Kafka cluster inside the test process for the
// Kafka adapter's tests and the end-to-end scenarios: franz-go's kfake
// (github.com/twmb/franz-go/pkg/kfake), one broker listening on a loopback
// port, with its data in a directory of the test's own so that Stop and
// Start keep what it stored. There is no Apache Kafka server on the machines
// this project is tested on; kfake speaks the Kafka wire protocol, so the
// txbox binary, kcat or any other client reaches it over TCP.
//
// kfake is not Kafka. It has one node, so acks=all and replication are
// trivially met, and Stop is its clean shutdown (it saves state and closes
// the listener and every connection), not a crash: a test here can show
// that a restarted broker still holds what it acknowledged and that clients
// reconnect, not that Kafka survives power loss.
package kafkatest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is a one-broker kfake cluster on 127.0.0.1.
type Cluster struct {
	t    testing.TB
	Port int
	Dir  string
	opts []kfake.Opt

	mu  sync.Mutex
	c   *kfake.Cluster
	raw []rawBatch // produce batches in arrival order, not yet decoded

	decodeMu sync.Mutex // guards what follows; taken before mu
	decoded  []*kgo.Record
	seen     map[batchID]bool
	names    map[[16]byte]string
}

type rawBatch struct {
	topic     string
	topicID   [16]byte
	partition int32
	data      []byte
}

// batchID identifies an idempotent batch: a producer's retry of a batch the
// broker already stored repeats it, and the broker drops the retry.
type batchID struct {
	topic     string
	partition int32
	pid       int64
	epoch     int16
	seq       int32
}

// Start starts a cluster for the test and stops it when the test ends.
// Extra kfake options (topics, broker configs) are applied at every start.
func Start(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Dir: t.TempDir(), opts: opts, seen: map[batchID]bool{}, names: map[[16]byte]string{}}
	c.start(0)
	t.Cleanup(c.Stop)
	return c
}

// Addr is "127.0.0.1:port".
func (c *Cluster) Addr() string { return "127.0.0.1:" + strconv.Itoa(c.Port) }

// URL is the broker URL the txbox binary takes: "kafka://127.0.0.1:port".
func (c *Cluster) URL() string { return "kafka://" + c.Addr() }

// Kfake is the running cluster (nil while stopped), for kfake's own tools:
// faults, topic creation, group inspection.
func (c *Cluster) Kfake() *kfake.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

// Stop shuts the cluster down: the port refuses connections until Start.
// Records produced so far are decoded first, while topic ids still resolve.
func (c *Cluster) Stop() {
	c.decodeMu.Lock()
	defer c.decodeMu.Unlock()
	c.decode()
	c.mu.Lock()
	kc := c.c
	c.c = nil
	c.mu.Unlock()
	if kc == nil {
		return
	}
	kc.Close()
	// Close returns once state is saved; wait for the port to be free.
	for i := 0; i < 100 && portOpen(c.Port); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// Start restarts a stopped cluster on the same port and data directory; it
// holds what it held when stopped.
func (c *Cluster) Start() {
	c.t.Helper()
	c.mu.Lock()
	running := c.c != nil
	c.mu.Unlock()
	if !running {
		c.start(c.Port)
	}
}

func (c *Cluster) start(port int) {
	c.t.Helper()
	opts := append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DataDir(c.Dir),
		kfake.SyncWrites(),
		kfake.GroupMinSessionTimeout(time.Second),
	}, c.opts...)
	var kc *kfake.Cluster
	var err error
	// The port of a cluster just stopped may linger for a moment.
	for i := 0; i < 50; i++ {
		if kc, err = kfake.NewCluster(opts...); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("kafkatest: start kfake on port %d: %v", port, err)
	}
	_, p, _ := net.SplitHostPort(kc.ListenAddrs()[0])
	c.Port, _ = strconv.Atoi(p)
	kc.ControlKey(int16(kmsg.Produce), c.tap)
	c.mu.Lock()
	c.c = kc
	c.mu.Unlock()
}

// tap keeps every produce request the broker handles, in arrival order, and
// lets the broker handle it. It runs on the cluster's goroutine, so it only
// copies.
func (c *Cluster) tap(req kmsg.Request) (kmsg.Response, error, bool) {
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range pr.Topics {
		for _, p := range t.Partitions {
			c.raw = append(c.raw, rawBatch{topic: t.Topic, topicID: t.TopicID, partition: p.Partition, data: append([]byte(nil), p.Records...)})
		}
	}
	return nil, nil, false
}

// Produced returns every record of every produce request the broker
// handled, in arrival order: duplicates the relay published are there, a
// producer's internal retry of a batch already received is not. Offsets are
// not known here (records are taken from the requests). Records the broker
// refused (a size limit) are included.
func (c *Cluster) Produced() []*kgo.Record {
	c.decodeMu.Lock()
	defer c.decodeMu.Unlock()
	c.decode()
	return append([]*kgo.Record(nil), c.decoded...)
}

// decode decodes what the tap kept. Called with decodeMu held and mu not:
// TopicIDInfo runs on the cluster's goroutine, which may be waiting in tap.
func (c *Cluster) decode() {
	c.mu.Lock()
	raw, kc := c.raw, c.c
	c.raw = nil
	c.mu.Unlock()
	for _, b := range raw {
		topic := b.topic
		if topic == "" {
			n, ok := c.names[b.topicID]
			if !ok && kc != nil {
				if info := kc.TopicIDInfo(b.topicID); info != nil {
					n, ok = info.Topic, true
					c.names[b.topicID] = n
				}
			}
			topic = n
		}
		c.decoded = append(c.decoded, c.decodeBatches(topic, b.partition, b.data)...)
	}
}

// decodeBatches splits a partition's record batches and decodes each one
// not seen before.
func (c *Cluster) decodeBatches(topic string, partition int32, data []byte) []*kgo.Record {
	var out []*kgo.Record
	for len(data) >= 12 {
		n := int(binary.BigEndian.Uint32(data[8:12]))
		if n < 0 || 12+n > len(data) {
			break
		}
		one := data[:12+n]
		data = data[12+n:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(one); err != nil {
			continue
		}
		if rb.ProducerID >= 0 {
			id := batchID{topic, partition, rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence}
			if c.seen[id] {
				continue
			}
			c.seen[id] = true
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: partition},
			&kmsg.FetchResponseTopicPartition{Partition: partition, HighWatermark: math.MaxInt64, LastStableOffset: math.MaxInt64, RecordBatches: one},
			kgo.DefaultDecompressor(), nil)
		out = append(out, fp.Records...)
	}
	return out
}

// CreateTopic creates a topic with partitions (0: the cluster default) and
// topic configs, e.g. {"max.message.bytes": "4096"}.
func (c *Cluster) CreateTopic(topic string, partitions int32, configs map[string]string) error {
	kc := c.Kfake()
	if kc == nil {
		return fmt.Errorf("kafkatest: cluster stopped")
	}
	return kc.CreateTopic(topic, partitions, configs)
}

// Client returns a plain franz-go client of the cluster, closed when the
// test ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ReadAll reads every record of topic from the start, waiting up to d for
// at least want of them.
func (c *Cluster) ReadAll(t testing.TB, topic string, want int, d time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func portOpen(port int) bool {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 100*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
