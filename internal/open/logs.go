package open

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// RouteLibraryLogs sends what third-party clients log on their own through
// l, so that with --log-format json every line on stderr is JSON. go-redis
// writes to the standard library's log package unless told otherwise
// ("redis: 2026/12/01 ... pool.go:770: ..."); its logger is process-wide.
// (paho, the MQTT client, logs nothing unless given a logger.)
func RouteLibraryLogs(l *slog.Logger) {
	goredis.SetLogger(redisLog{l})
}

type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	r.l.WarnContext(ctx, "redis client: "+strings.TrimPrefix(msg, "redis: "))
}
