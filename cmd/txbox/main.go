// Command txbox is the relay daemon and the operators' tool for the
// transactional outbox: migrate, relay, stats, dead-letter handling, cleanup.
//
// Every flag has an environment variable: --foo-bar is TXBOX_FOO_BAR. A flag
// given on the command line wins over the environment. The safety switches
// --yes and --all are the exception: command line only (env.go).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/internal/open"
	"github.com/txbox/txbox/internal/redact"
	"github.com/txbox/txbox/store"
	"github.com/txbox/txbox/store/postgres/cdc"
)

// commandStarted is set once cobra has parsed the command line and starts
// running a command: an error before that is a usage error.
var commandStarted bool

// jsonLog is the logger once --log-format json is in effect: main reports
// a failure through it, so that every line on stderr is JSON.
var jsonLog *slog.Logger

// globals are the settings every subcommand shares.
type globals struct {
	db, broker, topic     string
	schema, outbox, inbox string
	logLevel, logFormat   string
	deleteSent            bool
	noSplit               bool // relay: --split=false
	log                   *slog.Logger
	// migrating: the command creates the tables, so openStore does not
	// require them (nor a SQLite file: it is created).
	migrating bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile := cpuProfile(os.Getenv("TXBOX_CPUPROFILE"))
	err := newRoot().ExecuteContext(ctx)
	stopProfile()
	err = withFlagNames(err)
	if err != nil && !commandStarted {
		// Cobra's own errors (an argument a command does not take) come
		// before any command ran: they are usage errors.
		err = &usageError{msg: err.Error()}
	}
	if err != nil && jsonLog != nil {
		// --log-format json: the last line is JSON too.
		jsonLog.Error("txbox: "+oneLine(err), "exit_code", exitCode(err))
		os.Exit(exitCode(err))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "txbox:", oneLine(err))
		os.Exit(exitCode(err))
	}
}

// cpuProfile writes a CPU profile of the whole run to path (TXBOX_CPUPROFILE),
// for finding where a relay's time goes; "" does nothing.
func cpuProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "txbox: TXBOX_CPUPROFILE:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// oneLine is err's text on one line. A line repeated in the text is kept
// once: pgx reports each try of a connection (TLS, then plain, with
// sslmode=prefer) on a line of its own, and both tries usually fail alike.
func oneLine(err error) string {
	var out strings.Builder
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimPrefix(err.Error(), "txbox: "), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		if out.Len() > 0 {
			if strings.HasSuffix(out.String(), ":") {
				out.WriteString(" ")
			} else {
				out.WriteString("; ")
			}
		}
		out.WriteString(l)
	}
	return out.String()
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "txbox",
		Short:         "Transactional outbox relay and admin tool",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			commandStarted = true
			if err := bindEnv(cmd); err != nil {
				return err
			}
			if err := g.setupLog(); err != nil {
				return err
			}
			warnEnv(cmd.Root(), os.Environ(), g.log)
			return nil
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&g.db, "db", "", "database URL: postgres://..., mysql://..., sqlite://PATH")
	f.StringVar(&g.schema, "schema", "", "schema (PostgreSQL) holding the tables; default: search path")
	f.StringVar(&g.outbox, "outbox-table", "outbox_event", "outbox table name")
	f.StringVar(&g.inbox, "inbox-table", "inbox_event", "inbox table name")
	f.StringVar(&g.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&g.logFormat, "log-format", "text", "text or json")

	root.AddCommand(newMigrate(g), newRelay(g), newStats(g), newDead(g), newInbox(g), newCleanup(g), newCDC(g), newDemo(), newUI(g), newVersion())
	conventions(root)
	return root
}

// bindEnv fills every flag that was not given on the command line from its
// TXBOX_* variable. A value the flag rejects is a config error naming both.
// The flags of flagOnly have no variable.
func bindEnv(cmd *cobra.Command) error {
	var firstErr error
	visit := func(fl *pflag.Flag) {
		if firstErr != nil || fl.Changed || flagOnly[fl.Name] {
			return
		}
		env := envName(fl.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := fl.Value.Set(v); err != nil {
				firstErr = &txbox.ConfigError{Field: fmt.Sprintf("--%s (%s)", fl.Name, env), Reason: err.Error()}
			}
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return firstErr
}

func envName(flag string) string {
	return "TXBOX_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (g *globals) setupLog() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return &txbox.ConfigError{Field: "--log-level (TXBOX_LOG_LEVEL)", Reason: fmt.Sprintf("%q: want debug, info, warn or error", g.logLevel)}
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText}
	switch g.logFormat {
	case "text":
		g.log = slog.New(slog.NewTextHandler(os.Stderr, opts))
	case "json":
		g.log = slog.New(slog.NewJSONHandler(os.Stderr, opts))
		jsonLog = g.log
	default:
		return &txbox.ConfigError{Field: "--log-format (TXBOX_LOG_FORMAT)", Reason: fmt.Sprintf("%q: want text or json", g.logFormat)}
	}
	slog.SetDefault(g.log)
	return nil
}

func (g *globals) tables() store.Tables {
	return store.Tables{Schema: g.schema, Outbox: g.outbox, Inbox: g.inbox}
}

func (g *globals) openStore(ctx context.Context) (store.Store, error) {
	s, err := g.reachStore(ctx)
	if err != nil {
		return nil, err
	}
	if !g.migrating {
		if err := checkOutbox(ctx, s); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// withStore opens the store for one command, runs do with it and closes
// it. Commands check their flags first: a bad flag is a usage error (exit
// 2) without a connection.
func (g *globals) withStore(ctx context.Context, do func(store.Store) error) error {
	s, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	return do(s)
}

// reachStore opens the database and checks that it answers.
func (g *globals) reachStore(ctx context.Context) (store.Store, error) {
	s, err := open.Store(ctx, g.db, open.StoreOptions{Tables: g.tables(), DeleteSent: g.deleteSent, NoSplit: g.noSplit, Logger: g.log, Existing: !g.migrating})
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("database %s: %w", redact.URL(g.db), err)
	}
	return s, nil
}

func newMigrate(g *globals) *cobra.Command {
	var withCDC bool
	var slot string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the outbox and inbox tables (safe to run concurrently)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if slot != "" && !withCDC {
				return &txbox.ConfigError{Field: flagField("slot"), Reason: "only with --cdc"}
			}
			if slot != "" {
				if err := cdc.ValidateSlot(slot); err != nil {
					return err
				}
			}
			if withCDC && !isPostgresURL(g.db) {
				return &txbox.ConfigError{Field: flagField("cdc"), Reason: "CDC needs a PostgreSQL database (--db postgres://...)"}
			}
			g.migrating = true
			return g.withStore(cmd.Context(), func(s store.Store) error {
				if err := s.Migrate(cmd.Context()); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
				if withCDC {
					return migrateCDC(cmd.Context(), cmd, s, slot)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&withCDC, "cdc", false, "also prepare PostgreSQL for 'txbox relay --mode cdc': check wal_level = logical, create the publication on the outbox table")
	cmd.Flags().StringVar(&slot, "slot", "", "with --cdc: also create this replication slot now, so tableless events (outbox.WithCDCMessages) written before the relay first starts are kept")
	return cmd
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
