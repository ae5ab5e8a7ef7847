package rabbitmqbroker

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	ms := time.Millisecond
	for in, want := range map[time.Duration]time.Duration{
		0:                         10 * ms,
		time.Microsecond:          10 * ms,
		10 * ms:                   10 * ms,
		11 * ms:                   12 * ms,
		100 * ms:                  100 * ms,
		101 * ms:                  120 * ms,
		500 * ms:                  500 * ms,
		501 * ms:                  600 * ms,
		time.Second + ms:          1200 * ms,
		7 * time.Second:           8 * time.Second,
		90 * time.Second:          100 * time.Second,
		300 * time.Second:         300 * time.Second,
		1200 * time.Hour:          4294967295 * ms, // RabbitMQ's TTL limit
		250*ms + time.Microsecond: 300 * ms,
	} {
		got := retryDelay(in)
		if got != want {
			t.Errorf("retryDelay(%v) = %v, want %v", in, got, want)
		}
		if got < in && in < 4294967295*ms {
			t.Errorf("retryDelay(%v) = %v is shorter than asked", in, got)
		}
		if in > 10*ms && in < 4294967295*ms && got > in*4/3+ms {
			t.Errorf("retryDelay(%v) = %v is more than a third longer", in, got)
		}
	}
}
