package faults

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/internal/testenv"
)

// Kafka is a Kafka cluster of the run's own: franz-go's kfake, one broker,
// in this test process (there is no Kafka server on the machines this
// project is tested on), its data in a directory of the test's so that a
// restart keeps what it stored. The relays' topic is created with the
// cluster, its partitions fixed.
//
// A Kafka client bootstraps from one address and then connects to the
// addresses the cluster's metadata gives, so a proxy in front of the
// bootstrap address alone would see no traffic. The cluster therefore
// listens on an address of its own and advertises the proxy's: every
// connection of the relays and the consumers goes through the proxy. The
// checker dials the cluster's own address instead (kgo.Dialer), whatever
// the metadata says.
type Kafka struct {
	t      *testing.T
	dir    string
	inner  string // where the cluster listens
	KProxy *testenv.Proxy
	Topic  string

	mu sync.Mutex
	c  *kfake.Cluster
}

// kafkaPartitions is the topic's partitions: enough for the two members
// of a consumer group to share.
const kafkaPartitions = 4

// NewKafka starts the cluster behind its proxy, stopped when t ends.
func NewKafka(t *testing.T) *Kafka {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Kafka{t: t, dir: t.TempDir(), inner: ln.Addr().String(), Topic: "faults.Order.OrderChanged"}
	b.KProxy = testenv.NewProxy(t, b.inner)
	b.start(ln)
	t.Cleanup(b.Stop)
	if err := b.cluster().CreateTopic(b.Topic, kafkaPartitions, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

// advertised is the cluster's listener, which names the proxy's address
// as its own: kfake advertises its listener's address.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

func (b *Kafka) start(ln net.Listener) {
	var err error
	for i := 0; ln == nil; i++ {
		// The port of a cluster just stopped may linger for a moment.
		if ln, err = net.Listen("tcp", b.inner); err != nil {
			if i == 100 {
				b.t.Fatalf("kfake: listen on %s again: %v", b.inner, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	proxy, _ := net.ResolveTCPAddr("tcp", b.KProxy.Addr())
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DataDir(b.dir),
		kfake.SyncWrites(),
		kfake.GroupMinSessionTimeout(time.Second),
		kfake.ListenFn(func(string, string) (net.Listener, error) { return advertised{ln, proxy}, nil }),
	)
	if err != nil {
		_ = ln.Close()
		b.t.Fatalf("kfake: %v", err)
	}
	b.mu.Lock()
	b.c = c
	b.mu.Unlock()
}

func (b *Kafka) cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c
}

func (b *Kafka) Kind() string          { return "kafka" }
func (b *Kafka) URL() string           { return "kafka://" + b.KProxy.Addr() }
func (b *Kafka) Proxy() *testenv.Proxy { return b.KProxy }
func (b *Kafka) RelayArgs() []string   { return nil }
func (b *Kafka) ConsumerEnv() []string { return []string{"FAULTS_STREAM=" + b.Topic} }

// Minimums has no topic deleted and made again (NATS's stream-recreated
// fault): a consumer group's committed offsets would point into the
// deleted topic's log and the checker would have to keep its records as
// the NATS fault does; not done.
func (b *Kafka) Minimums() Minimums { return Minimums{RestartBroker: 2, ProduceRefused: 1} }

// Stop shuts the cluster down (kfake saves its state: this is a clean
// shutdown, not a crash); the proxy then finds nothing to connect to.
func (b *Kafka) Stop() {
	b.mu.Lock()
	c := b.c
	b.c = nil
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Start starts a stopped cluster again, with what it stored.
func (b *Kafka) Start() {
	if b.cluster() == nil {
		b.start(nil)
	}
}

func (b *Kafka) Fault(ctx context.Context, f Fault) (string, error) {
	if f.Kind == ProduceRefused {
		return b.refuseProduce(ctx)
	}
	return "", errNotHere
}

func (b *Kafka) Diagnose(context.Context) string { return "" }

// refuseProduce is Kafka's stream full: for 3 s the broker answers every
// produce request with NOT_ENOUGH_REPLICAS, as a cluster does whose
// in-sync replicas fell below min.insync.replicas (a retriable error:
// nothing is stored, the producer may try again).
func (b *Kafka) refuseProduce(context.Context) (string, error) {
	c := b.cluster()
	if c == nil {
		return "", fmt.Errorf("the cluster is stopped")
	}
	var refused atomic.Int64
	var over atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if over.Load() {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.NotEnoughReplicas.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		refused.Add(1)
		return resp, nil, true
	})
	time.Sleep(3 * time.Second)
	over.Store(true)
	return fmt.Sprintf("%d produce requests refused in 3s", refused.Load()), nil
}

// Read reads every record of the topic from the start, partition by
// partition up to the end offsets it finds first. An aggregate's records
// are in one partition (the key is the aggregate id), in the order stored.
func (b *Kafka) Read(ctx context.Context) ([]streamMsg, error) {
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, b.inner)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.inner), kgo.Dialer(dial))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = b.Topic
	for p := range int32(kafkaPartitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1 // the end
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("end offset of partition %d: %w", p.Partition, err)
			}
			if p.Offset > 0 {
				ends[p.Partition] = p.Offset
				start[p.Partition] = kgo.NewOffset().AtStart()
			}
		}
	}
	if len(ends) == 0 {
		return nil, nil
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.inner), kgo.Dialer(dial),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{b.Topic: start}))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	byPart := map[int32][]streamMsg{}
	next := map[int32]int64{}
	remaining := len(ends)
	for remaining > 0 {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cons.PollFetches(fctx)
		cancel()
		if fctx.Err() != nil && fs.NumRecords() == 0 {
			return nil, fmt.Errorf("topic read stalled: %d partitions short of their end", remaining)
		}
		for _, r := range fs.Records() {
			if next[r.Partition] >= ends[r.Partition] {
				continue
			}
			var id string
			for _, h := range r.Headers {
				if h.Key == kafkabroker.HeaderPrefix+"id" {
					id = string(h.Value)
				}
			}
			byPart[r.Partition] = append(byPart[r.Partition], streamMsg{id: id})
			next[r.Partition] = r.Offset + 1
			if next[r.Partition] >= ends[r.Partition] {
				remaining--
			}
		}
	}
	var out []streamMsg
	for p := range int32(kafkaPartitions) {
		out = append(out, byPart[p]...)
	}
	return out, nil
}
