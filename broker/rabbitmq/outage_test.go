package rabbitmqbroker_test

import (
	"context"
	"errors"
	"net/url"
	"os/exec"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/broker"
	"github.com/txbox/txbox/broker/internal/adaptertest"
	rabbitmqbroker "github.com/txbox/txbox/broker/rabbitmq"
	"github.com/txbox/txbox/internal/testenv"
)

func publishOne(t *testing.T, p broker.Publisher, m broker.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Publish(ctx, []broker.Message{m})[0]
}

// eventually publishes m until it is confirmed, within a bound; every
// failure before must be an outage.
func eventually(t *testing.T, p broker.Publisher, m broker.Message) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := publishOne(t, p, m)
		if err == nil {
			return
		}
		if !errors.Is(err, txbox.ErrBrokerUnavailable) || time.Now().After(deadline) {
			t.Fatalf("after the cause was fixed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestQueueDeletedIsOutage: the only queue bound to the routing key is
// deleted under the publisher; the broker returns the message as
// unroutable, an outage naming the routing key; bound again, the same
// event is confirmed.
func TestQueueDeletedIsOutage(t *testing.T) {
	rawURL, adm, exchange, prefix := setup(t)
	topic := prefix + ".Order.Created"
	queue := prefix + ".q"
	adm.queue(t, exchange, queue, topic)
	p := adaptertest.Open(t, rabbitmqbroker.Open, rawURL, rabbitmqbroker.Options{Exchange: exchange})
	if err := publishOne(t, p, adaptertest.Msg(topic, "k", 0)); err != nil {
		t.Fatal(err)
	}
	adm.do(t, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(queue, false, false, false); return err })
	m := adaptertest.Msg(topic, "k", 1)
	adaptertest.IsOutage(t, "queue deleted", publishOne(t, p, m), `no queue is bound to routing key "`+topic+`"`)
	adm.queue(t, exchange, queue, topic)
	eventually(t, p, m)
}

// TestQueueFullIsOutage: a queue at its length limit with overflow
// reject-publish makes the broker nack the message: an outage, since the
// same event is taken once a consumer or an operator makes room.
func TestQueueFullIsOutage(t *testing.T) {
	rawURL, adm, exchange, prefix := setup(t)
	topic := prefix + ".Order.Created"
	queue := prefix + ".full"
	adm.do(t, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
			return err
		}
		return ch.QueueBind(queue, topic, exchange, false, nil)
	})
	t.Cleanup(func() {
		adm.mu.Lock()
		defer adm.mu.Unlock()
		_, _ = adm.ch.QueueDelete(queue, false, false, false)
	})
	p := adaptertest.Open(t, rabbitmqbroker.Open, rawURL, rabbitmqbroker.Options{Exchange: exchange})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := p.Publish(ctx, []broker.Message{adaptertest.Msg(topic, "a", 0), adaptertest.Msg(topic, "b", 1)})
	if errs[0] != nil {
		t.Fatalf("first message: %v", errs[0])
	}
	adaptertest.IsOutage(t, "queue full", errs[1], "nacked")
	adm.do(t, func(ch *amqp.Channel) error { _, err := ch.QueuePurge(queue, false); return err })
	eventually(t, p, adaptertest.Msg(topic, "b", 1))
}

// TestExchangeDeletedIsOutage: the exchange is deleted under the
// publisher; the broker closes the channel with NOT_FOUND, an outage naming
// the exchange; declared again, the next call publishes on a new channel.
func TestExchangeDeletedIsOutage(t *testing.T) {
	rawURL, adm, exchange, prefix := setup(t)
	topic := prefix + ".Order.Created"
	adm.queue(t, exchange, prefix+".q", topic)
	p := adaptertest.Open(t, rabbitmqbroker.Open, rawURL, rabbitmqbroker.Options{Exchange: exchange})
	if err := publishOne(t, p, adaptertest.Msg(topic, "k", 0)); err != nil {
		t.Fatal(err)
	}
	adm.do(t, func(ch *amqp.Channel) error { return ch.ExchangeDelete(exchange, false, false) })
	m := adaptertest.Msg(topic, "k", 1)
	adaptertest.IsOutage(t, "exchange deleted", publishOne(t, p, m), `exchange "`+exchange+`" does not exist`)
	adm.exchange(t, exchange)
	adm.do(t, func(ch *amqp.Channel) error { return ch.QueueBind(prefix+".q", topic, exchange, false, nil) })
	eventually(t, p, m)
}

// rabbitmqUser makes a user of the test's own on the machine's broker with
// rabbitmqctl, deleted when the test ends, and returns ctl, which runs
// rabbitmqctl (a missing or refused rabbitmqctl skips the test).
func rabbitmqUser(t *testing.T, user, pass string) (ctl func(args ...string)) {
	t.Helper()
	bin, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		testenv.Missing(t, "rabbitmqctl is not installed (Debian package rabbitmq-server)")
	}
	ctl = func(args ...string) {
		t.Helper()
		// rabbitmqctl starts an Erlang node of its own each time: over 30 s
		// on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			testenv.Missing(t, "rabbitmqctl "+args[0]+" on the machine's broker: "+err.Error()+": "+string(out))
		}
	}
	ctl("add_user", user, pass)
	t.Cleanup(func() { _ = exec.Command(bin, "delete_user", user).Run() })
	return ctl
}

func withUser(t *testing.T, rawURL, user, pass string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, pass)
	u.Path = "/"
	return u.String()
}

// TestWriteRefusedIsOutage: a user whose permissions do not allow writing
// to the exchange gets ACCESS_REFUSED: an outage, gone once the
// permissions allow it.
func TestWriteRefusedIsOutage(t *testing.T) {
	rawURL, adm, exchange, prefix := setup(t)
	user, pass := prefix, "pw-"+prefix
	ctl := rabbitmqUser(t, user, pass)
	ctl("set_permissions", "-p", "/", user, ".*", "^$", ".*") // configure, write, read
	topic := prefix + ".Order.Created"
	adm.queue(t, exchange, prefix+".q", topic)
	p := adaptertest.Open(t, rabbitmqbroker.Open, withUser(t, rawURL, user, pass), rabbitmqbroker.Options{Exchange: exchange})
	m := adaptertest.Msg(topic, "k", 0)
	adaptertest.IsOutage(t, "write refused", publishOne(t, p, m), "ACCESS_REFUSED")
	ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
	eventually(t, p, m)
}

// TestCredentialsRefusedOnReconnectIsOutage: the password changes while
// the publisher runs; its next connection is refused. At Open that is a
// configuration error, but here it stops the way out, not the event: an
// outage, gone once the password is back.
func TestCredentialsRefusedOnReconnectIsOutage(t *testing.T) {
	rawURL, adm, exchange, prefix := setup(t)
	user, pass := prefix, "pw-"+prefix
	ctl := rabbitmqUser(t, user, pass)
	ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
	topic := prefix + ".Order.Created"
	adm.queue(t, exchange, prefix+".q", topic)
	via, proxy := testenv.ProxyURL(t, withUser(t, rawURL, user, pass))
	p := adaptertest.Open(t, rabbitmqbroker.Open, via, rabbitmqbroker.Options{Exchange: exchange})
	if err := publishOne(t, p, adaptertest.Msg(topic, "k", 0)); err != nil {
		t.Fatal(err)
	}
	ctl("change_password", user, "other-"+pass)
	proxy.Cut()
	_ = publishOne(t, p, adaptertest.Msg(topic, "k", 1)) // finds the connection gone
	proxy.Restore()
	m := adaptertest.Msg(topic, "k", 1)
	adaptertest.IsOutage(t, "credentials refused on reconnection", publishOne(t, p, m), "username or password not allowed")
	ctl("change_password", user, pass)
	eventually(t, p, m)
}
