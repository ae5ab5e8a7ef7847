package testenv

import (
	"regexp"
	"strings"
	"sync"
)

// AllowedSkip is a skip CI accepts: a test whose package and name match,
// skipping for Reason. Every skip that happens under
// TXBOX_REQUIRE_SERVICES=1 is listed here; .ci/run fails on any other
// (internal/testenv/skipcheck), so a test cannot stop proving something
// without this list saying so in review.
type AllowedSkip struct {
	Package string // regexp of the whole import path below the module, e.g. `broker/(kafka|mqtt)`
	Test    string // regexp of the whole test name, subtests included
	Reason  string
}

// Skips is the one list of allowed skips.
var Skips = []AllowedSkip{
	// The broker conformance suite runs every case on every adapter; a case
	// for a capability the adapter does not declare skips.
	{`broker/(kafka|mqtt|rabbitmq|redis|webhook)`, `TestConformance\w*/NativeDedupe`,
		"the broker has no native deduplication (brokertest: adapter does not declare NativeDedupe)"},
	{`broker/(mem|mqtt|rabbitmq|redis|webhook)`, `TestConformance\w*/AsyncAck`,
		"the subscriber acks in order only (brokertest: no broker.AsyncAcker)"},
	{`broker/(mqtt|rabbitmq|redis|webhook)`, `TestConformance\w*/Pipelined(OneKey|FailureLeavesNoGap)`,
		"the broker may store a later message of a key after an earlier one failed, so the relay keeps one unconfirmed event per key (brokertest: PipelinesPerKey not declared)"},
	{`broker/nats`, `TestConformance/Pipelined(OneKey|FailureLeavesNoGap)`,
		"nats-server 2.9 (the service, the Debian package) has no atomic batch publish, so the publisher keeps one unconfirmed event per key; TestConformanceFastBatch and TestConformanceAtomicBatch run these cases on a 2.15 server (brokertest: PipelinesPerKey not declared)"},
	{`broker/webhook`, `TestConformance/RedeliveryAckWait`,
		"an HTTP endpoint has no subscriber and no redelivery (brokertest: Redelivery not declared)"},
	{`broker/mqtt`, `TestConformance\w*/MissingDestinationIsOutage`,
		"an MQTT topic exists once anything is published to it: no destination can be missing (brokertest: Harness.MissingDestination not set)"},
	{`broker/mqtt`, `TestConformance\w*/StaleDeliverySettlesNothing`,
		"an MQTT broker keeps a subscriber's messages in its session, not in a destination that can be deleted and made again; a second subscriber of the group takes the session over (brokertest: Harness.RecreateDestination not set)"},
	{`broker/webhook`, `TestConformance/StaleDeliverySettlesNothing`,
		"an HTTP endpoint keeps no messages: no destination to delete and make again, no delivery held across that (brokertest: Harness.RecreateDestination not set)"},
	{`broker/mqtt`, `TestConformanceSharedBroker/BrokerDown`,
		"the shared mosquitto is not the test's to stop; TestConformance runs BrokerDown on a mosquitto of its own"},

	// The store conformance suite likewise: cases for an optional
	// interface the store does not implement.
	{`store/(mysql|sqlite)`, `TestStoreConformance\w*/(TxClaims|ChainClaims)`,
		"only PostgreSQL holds claims by the claim's transaction (claimapi.TxClaimer, and chains them: claimapi.ChainClaimer); MySQL and SQLite claim by lease"},
	{`store/(mysql|sqlite)`, `TestInboxConformance\w*/Inbox(Acquire|Insert)Processed`,
		"the inbox fast paths (store.InboxProcessedAcquirer, store.InboxBatchInserter) are PostgreSQL's"},

	// End-to-end scenarios that need something of the broker.
	{`internal/scenario`, `TestSQLiteNATS/DatabaseDown`,
		"SQLite is a file in the relay's own process: there is no server or connection to lose"},
	{`internal/scenario`, `TestPostgresRedis/PoisonRowDeadAndReplay`,
		"Redis accepts every stream name: no event type makes an invalid destination, so no poison row"},
}

var (
	compileOnce sync.Once
	compiled    []*[2]*regexp.Regexp
)

// module is the import path prefix AllowedSkip.Package is relative to.
const module = "github.com/txbox/txbox/"

// SkipAllowed reports whether a skip of test in the package with import path
// pkg is listed in Skips, and why.
func SkipAllowed(pkg, test string) (string, bool) {
	compileOnce.Do(func() {
		for _, s := range Skips {
			compiled = append(compiled, &[2]*regexp.Regexp{
				regexp.MustCompile(`^(?:` + s.Package + `)$`), regexp.MustCompile(`^(?:` + s.Test + `)$`),
			})
		}
	})
	rel := strings.TrimPrefix(pkg, module)
	for i, re := range compiled {
		if re[0].MatchString(rel) && re[1].MatchString(test) {
			return Skips[i].Reason, true
		}
	}
	return "", false
}
