package open

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox/broker"
	redisbroker "github.com/txbox/txbox/broker/redis"
)

var redisFlags struct {
	maxLen           int64
	maxPayload       int
	assumePersistent bool
}

func init() {
	registerPublisher(publisherDef{
		schemes: []string{"redis", "rediss"},
		flags: func(f *pflag.FlagSet) {
			f.Int64Var(&redisFlags.maxLen, "redis-maxlen", 0, "trim each stream to about this many entries (XADD MAXLEN ~); 0 keeps everything. Unread entries are trimmed too")
			f.IntVar(&redisFlags.maxPayload, "redis-max-payload", 0, "largest payload in bytes (0: the server's proto-max-bulk-len)")
			f.BoolVar(&redisFlags.assumePersistent, "redis-assume-persistent", false, "declare that the server persists what it acknowledged, when CONFIG GET appendonly is not allowed")
		},
		check: checkRedisFlags,
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			return redisbroker.Open(ctx, raw, redisbroker.Options{
				MaxLen: redisFlags.maxLen, MaxPayload: redisFlags.maxPayload, AssumePersistent: redisFlags.assumePersistent,
				Connection: redisbroker.Connection{Logger: log, Name: "txbox-relay"},
			})
		},
	})
}

// checkRedisFlags refuses bad numbers before anything connects.
func checkRedisFlags() error {
	return cmp.Or(
		notNegative("redis-maxlen", redisFlags.maxLen, "want a number of entries, or 0 to keep everything"),
		notNegative("redis-max-payload", redisFlags.maxPayload, "want a number of bytes, or 0 for the server's limit"),
	)
}
