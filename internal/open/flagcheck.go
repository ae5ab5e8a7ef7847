package open

import (
	"fmt"
	"strings"
	"time"

	"github.com/txbox/txbox"
)

// flagField names a broker flag in a *txbox.ConfigError: the flag and the
// environment variable that sets it ("--redis-maxlen (TXBOX_REDIS_MAXLEN)").
func flagField(flag string) string {
	return fmt.Sprintf("--%s (TXBOX_%s)", flag, strings.ToUpper(strings.ReplaceAll(flag, "-", "_")))
}

// notNegative refuses a negative value of flag, a size or a duration where
// 0 has a meaning of its own; want, when set, says what is expected.
func notNegative[N int | int64 | time.Duration](flag string, v N, want string) error {
	if v >= 0 {
		return nil
	}
	reason := fmt.Sprintf("%v is negative", v)
	if want != "" {
		reason += ": " + want
	}
	return &txbox.ConfigError{Field: flagField(flag), Reason: reason}
}
