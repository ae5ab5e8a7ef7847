package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/redact"
)

type uiFlags struct {
	addr, token, tokenFile string
	readOnly               bool
	sampleEvery            time.Duration
}

// check validates the flags before anything is opened: a console that
// would answer other machines without a token must not start.
func (f *uiFlags) check() (token string, err error) {
	if f.token != "" && f.tokenFile != "" {
		return "", &txbox.ConfigError{Field: "--token (TXBOX_TOKEN)", Reason: "give --token or --token-file, not both"}
	}
	token = f.token
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return "", &txbox.ConfigError{Field: "--token-file (TXBOX_TOKEN_FILE)", Reason: err.Error()}
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return "", &txbox.ConfigError{Field: "--token-file (TXBOX_TOKEN_FILE)", Reason: fmt.Sprintf("%s is empty", f.tokenFile)}
		}
	}
	if f.sampleEvery < time.Second {
		return "", &txbox.ConfigError{Field: "--sample-every (TXBOX_SAMPLE_EVERY)", Reason: fmt.Sprintf("%v: want 1s or more", f.sampleEvery)}
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return "", &txbox.ConfigError{Field: "--addr (TXBOX_ADDR)", Reason: fmt.Sprintf("%q: want host:port, e.g. 127.0.0.1:8080", f.addr)}
	}
	if token == "" && !console.LoopbackHost(host) {
		return "", &txbox.ConfigError{Field: "--addr (TXBOX_ADDR)", Reason: fmt.Sprintf("%q is not a loopback address; anyone who reaches it could replay and purge: give --token or --token-file, or bind 127.0.0.1", f.addr)}
	}
	return token, nil
}

func newUI(g *globals) *cobra.Command {
	f := &uiFlags{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the admin console (web pages and JSON API): backlog, dead letters, parked inbox events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := f.check()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			c, err := console.New(s, console.Options{Token: token, ReadOnly: f.readOnly, Database: redact.URL(g.db), SampleEvery: f.sampleEvery, Logger: g.log})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", f.addr)
			if err != nil {
				return fmt.Errorf("--addr %s: %w", f.addr, err)
			}
			srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _ = c.Run(ctx) }()
			go func() {
				<-ctx.Done()
				sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer scancel()
				_ = srv.Shutdown(sctx)
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "txbox console on http://%s/ (database %s)\n", ln.Addr(), redact.URL(g.db))
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address; anything but loopback requires --token or --token-file")
	fl.StringVar(&f.token, "token", "", "token every client must present (prefer TXBOX_TOKEN or --token-file: flags show in ps)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the token")
	fl.BoolVar(&f.readOnly, "read-only", false, "hide replay and purge; the API answers them 403")
	fl.DurationVar(&f.sampleEvery, "sample-every", 10*time.Second, "how often to count rows for the overview's chart (a full count of the outbox table)")
	return cmd
}
