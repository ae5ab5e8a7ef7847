package open

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
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
		open: func(ctx context.Context, raw string, log *slog.Logger) (broker.Publisher, error) {
			if err := checkRedisFlags(); err != nil {
				return nil, err
			}
			return redisbroker.Open(ctx, raw, redisbroker.Options{
				MaxLen: redisFlags.maxLen, MaxPayload: redisFlags.maxPayload, AssumePersistent: redisFlags.assumePersistent,
				Logger: log, Name: "txbox-relay",
			})
		},
	})
}

// checkRedisFlags refuses bad numbers before anything connects.
func checkRedisFlags() error {
	if redisFlags.maxLen < 0 {
		return &txbox.ConfigError{Field: "--redis-maxlen (TXBOX_REDIS_MAXLEN)", Reason: fmt.Sprintf("%d is negative: want a number of entries, or 0 to keep everything", redisFlags.maxLen)}
	}
	if redisFlags.maxPayload < 0 {
		return &txbox.ConfigError{Field: "--redis-max-payload (TXBOX_REDIS_MAX_PAYLOAD)", Reason: fmt.Sprintf("%d is negative: want a number of bytes, or 0 for the server's limit", redisFlags.maxPayload)}
	}
	return nil
}
