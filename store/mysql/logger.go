package mysql

import (
	"fmt"
	"log/slog"
	"strings"
)

// driverLog carries the driver's own log lines ("unexpected EOF", "closing
// bad idle connection", otherwise printed with the standard log package to
// stderr) into slog at debug level: each is a lost connection the store
// meets as an error of its own and reports there, so at the default level
// they would only repeat it, once per pooled connection. Open sets it on
// the pool it makes; a pool handed to New keeps the logger it was made
// with.
type driverLog struct{ log *slog.Logger }

func (l driverLog) Print(v ...any) {
	l.log.Debug(strings.TrimSpace(fmt.Sprint(v...)), "lib", "go-sql-driver/mysql")
}
