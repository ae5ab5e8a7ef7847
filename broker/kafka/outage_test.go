package kafkabroker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	kafkabroker "github.com/txbox/txbox/broker/kafka"
	"github.com/txbox/txbox/broker/kafka/kafkatest"
)

func publishCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestMissingTopicIsOutage: a topic that does not exist (not created yet,
// or deleted) fails its events as an outage, while the other topics of the
// call are confirmed; once it is created, the same event is confirmed.
func TestMissingTopicIsOutage(t *testing.T) {
	kc, p := withTopic(t, "here", 1)
	lost := adaptertest.Msg("later.Order.Created", "k", 0)
	errs := p.Publish(publishCtx(t, 10*time.Second), []broker.Message{adaptertest.Msg("here", "a", 0), lost, adaptertest.Msg("here", "b", 1)})
	adaptertest.IsOutage(t, "topic not created yet", errs[1], `topic "later.Order.Created" does not exist`)
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("messages for the existing topic: %v, %v; want confirmed", errs[0], errs[2])
	}
	if err := kc.CreateTopic("later.Order.Created", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(publishCtx(t, 10*time.Second), []broker.Message{lost})[0]; err != nil {
		t.Fatalf("after the topic was created: %v", err)
	}
}

// TestTopicDeletedUnderThePublisher: the publisher knows the topic, then
// it is deleted; the produce requests come back UNKNOWN_TOPIC_OR_PARTITION,
// an outage; created again, under a new topic id, which franz-go refuses
// (UNKNOWN_TOPIC_ID) until the topic is purged from the client, the topic
// takes the event. Then the same with the topic deleted and created again
// between two calls, unseen by the publisher.
func TestTopicDeletedUnderThePublisher(t *testing.T) {
	kc := kafkatest.Start(t)
	const topic = "gone.Order.Created"
	if err := kc.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{})
	if err := p.Publish(publishCtx(t, 10*time.Second), []broker.Message{adaptertest.Msg(topic, "k", 0)})[0]; err != nil {
		t.Fatal(err)
	}
	deleteTopic(t, kc, topic)
	m := adaptertest.Msg(topic, "k", 1)
	adaptertest.IsOutage(t, "topic deleted", p.Publish(publishCtx(t, 10*time.Second), []broker.Message{m})[0], topic)
	if err := kc.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	confirmedAgain(t, p, m)

	deleteTopic(t, kc, topic)
	if err := kc.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	confirmedAgain(t, p, adaptertest.Msg(topic, "k", 2))
}

func deleteTopic(t *testing.T, kc *kafkatest.Cluster, topic string) {
	t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	resp, err := req.RequestWith(publishCtx(t, 5*time.Second), kc.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
}

// confirmedAgain publishes m until it is confirmed, within a bound; every
// failure before must be an outage.
func confirmedAgain(t *testing.T, p *kafkabroker.Publisher, m broker.Message) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 1; ; attempt++ {
		err := p.Publish(publishCtx(t, 5*time.Second), []broker.Message{m})[0]
		if err == nil {
			t.Logf("confirmed at attempt %d after the topic was created again", attempt)
			return
		}
		t.Logf("attempt %d: %v", attempt, err)
		if !errors.Is(err, txbox.ErrBrokerUnavailable) || time.Now().After(deadline) {
			t.Fatalf("after the topic was created again: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTopicAuthorizationIsOutage: the cluster refuses the topic in its
// metadata (TOPIC_AUTHORIZATION_FAILED, an ACL without DESCRIBE): an
// outage, gone once the ACL allows it.
func TestTopicAuthorizationIsOutage(t *testing.T) {
	kc := kafkatest.Start(t)
	if err := kc.CreateTopic("guarded", 1, nil); err != nil {
		t.Fatal(err)
	}
	h := kc.Kfake().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "guarded", Err: kerr.TopicAuthorizationFailed, Count: -1})
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{})
	m := adaptertest.Msg("guarded", "k", 0)
	adaptertest.IsOutage(t, "topic forbidden in the metadata", p.Publish(publishCtx(t, 10*time.Second), []broker.Message{m})[0], `not authorized to use topic "guarded"`)
	h.Remove()
	if err := p.Publish(publishCtx(t, 10*time.Second), []broker.Message{m})[0]; err != nil {
		t.Fatalf("once allowed: %v", err)
	}
}

// TestTopicCreationRefusedIsOutage: with CreateTopics, a topic the cluster
// will not create as configured (a replication factor over the number of
// brokers) fails as an outage naming the setting, not as the event's
// failure: every event bound for a new topic would fail alike.
func TestTopicCreationRefusedIsOutage(t *testing.T) {
	kc := kafkatest.Start(t)
	p := adaptertest.Open(t, kafkabroker.Open, kc.URL(), kafkabroker.Options{CreateTopics: true, ReplicationFactor: 3})
	adaptertest.IsOutage(t, "topic creation refused", p.Publish(publishCtx(t, 10*time.Second), []broker.Message{adaptertest.Msg("new.Order.Created", "k", 0)})[0], "replication factor 3")
}
