package redisbroker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// slogPrintf carries go-redis's own log lines (pool and reconnect notices,
// otherwise printed with the standard log package to stderr) into slog, so
// they share the process's format and level.
type slogPrintf struct{ log *slog.Logger }

func (l slogPrintf) Printf(ctx context.Context, format string, v ...any) {
	l.log.InfoContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "lib", "go-redis")
}

// routeLibraryLogs sends go-redis's log through log. go-redis has one
// process-wide logger: the last adapter opened names it.
func routeLibraryLogs(log *slog.Logger) { redis.SetLogger(slogPrintf{log}) }
