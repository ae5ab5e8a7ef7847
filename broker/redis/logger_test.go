package redisbroker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// go-redis's own log lines come out through the adapter's slog logger.
func TestLibraryLogsGoThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	slogPrintf{slog.New(slog.NewJSONHandler(&buf, nil))}.Printf(context.Background(), "redis: %s failed\n", "dial")
	if got := buf.String(); !strings.Contains(got, `"msg":"redis: dial failed"`) || !strings.Contains(got, `"lib":"go-redis"`) {
		t.Fatalf("log line: %s", got)
	}
}
