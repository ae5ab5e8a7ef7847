package inbox

import (
	"errors"
	"fmt"
	"time"
)

// DefaultRetentionFloor is the least an inbox keeps processed rows, whatever
// the arithmetic below gives (seed 000 section 13: 7 to 14 days in practice).
const DefaultRetentionFloor = 7 * 24 * time.Hour

// DefaultManualWindow is the time operators get to notice and repair a
// stuck flow before its dedupe rows may go.
const DefaultManualWindow = 3 * 24 * time.Hour

// ErrRetentionTooShort is returned for a retention below the floor.
var ErrRetentionTooShort = errors.New("inbox: retention too short")

// Retention is how long processed inbox rows are kept, with the terms of the
// rule that bounds it. Deleting a row forgets that the event was applied; if
// the broker can still redeliver it after that, its effect is applied twice.
type Retention struct {
	Keep          time.Duration // the requested retention
	BrokerHorizon time.Duration // how long the broker may still redeliver (stream max age, TTL)
	RetryWindow   time.Duration // Config.RetryWindow() of the consumers
	ManualWindow  time.Duration // default DefaultManualWindow
	Floor         time.Duration // default DefaultRetentionFloor
}

func (r Retention) withDefaults() Retention {
	if r.ManualWindow == 0 {
		r.ManualWindow = DefaultManualWindow
	}
	if r.Floor == 0 {
		r.Floor = DefaultRetentionFloor
	}
	return r
}

// Minimum is max(Floor, BrokerHorizon + RetryWindow + ManualWindow).
func (r Retention) Minimum() time.Duration {
	r = r.withDefaults()
	return max(r.Floor, r.BrokerHorizon+r.RetryWindow+r.ManualWindow)
}

// Validate refuses a retention below Minimum, and says why.
func (r Retention) Validate() error {
	r = r.withDefaults()
	if minimum := r.Minimum(); r.Keep < minimum {
		return fmt.Errorf("%w: %v is below the minimum %v. An inbox row is what stops a redelivered event from being applied twice, "+
			"so it must outlive every redelivery: retention > broker redelivery horizon (%v) + retry window (%v) + manual repair window (%v), "+
			"and never below %v",
			ErrRetentionTooShort, r.Keep, minimum, r.BrokerHorizon, r.RetryWindow, r.ManualWindow, r.Floor)
	}
	return nil
}
