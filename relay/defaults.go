package relay

import "time"

// The defaults of Config: one source for the library and the CLI's flags.
const (
	DefaultSource       = "txbox"
	DefaultBatchSize    = 1000
	DefaultWorkers      = 2
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultIdlePollMax caps an idle relay's back-off: while its claims
	// keep coming back empty, its wait doubles from PollInterval up to this
	// (Config.IdlePollMax). It is also what the first rows of a burst after
	// an idle spell may wait, so it is kept to the p99 latency the relay
	// aims at for producers without a wake-up; an idle relay claims 10
	// times a second.
	DefaultIdlePollMax = 100 * time.Millisecond
	DefaultLease       = 30 * time.Second
	// DefaultPublishTimeout caps the default publish timeout, which is
	// min(DefaultPublishTimeout, Lease/3): it follows a shorter Lease.
	DefaultPublishTimeout = 10 * time.Second
	DefaultMaxAttempts    = 10
	DefaultBackoffBase    = time.Second
	DefaultBackoffMax     = 300 * time.Second
	// DefaultOutageProbeMax caps the interval between probes of a broker
	// that is out: a broker back from maintenance is used within 30 s.
	DefaultOutageProbeMax = 30 * time.Second
)

// ClaimMode chooses how claimed rows are reserved (Config.Claims).
type ClaimMode string

const (
	// ClaimAuto (or "") holds claimed rows by the claim's open transaction
	// where the store can (PostgreSQL), else by a lease.
	ClaimAuto ClaimMode = "auto"
	// ClaimLease always writes a lease into the rows.
	ClaimLease ClaimMode = "lease"
)

// publishTimeoutFor is the default publish timeout for a lease:
// min(DefaultPublishTimeout, lease/3).
func publishTimeoutFor(lease time.Duration) time.Duration {
	return min(DefaultPublishTimeout, lease/3)
}
