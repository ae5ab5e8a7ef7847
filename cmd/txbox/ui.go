package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/txbox/txbox"
	"github.com/txbox/txbox/console"
	"github.com/txbox/txbox/internal/loopback"
	"github.com/txbox/txbox/internal/redact"
)

type uiFlags struct {
	addr, token, tokenFile string
	tlsCert, tlsKey        string
	insecureHTTP           bool
	readOnly               bool
	sampleEvery            time.Duration
}

// check validates the flags before anything is opened: a console that
// would answer other machines without a token, or with a token in clear
// over the network, must not start. It returns the token and the TLS
// settings (nil: plain HTTP).
func (f *uiFlags) check() (token string, tlsConf *tls.Config, err error) {
	token, err = f.checkToken()
	if err != nil {
		return "", nil, err
	}
	if f.sampleEvery < time.Second {
		return "", nil, &txbox.ConfigError{Field: "--sample-every (TXBOX_SAMPLE_EVERY)", Reason: fmt.Sprintf("%v: want 1s or more", f.sampleEvery)}
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return "", nil, &txbox.ConfigError{Field: "--addr (TXBOX_ADDR)", Reason: fmt.Sprintf("%q: want host:port, e.g. 127.0.0.1:8080", f.addr)}
	}
	loopback := loopback.Host(host)
	if token == "" && !loopback {
		return "", nil, &txbox.ConfigError{Field: "--addr (TXBOX_ADDR)", Reason: fmt.Sprintf("%q is not a loopback address; anyone who reaches it could replay and purge: give --token or --token-file, or bind 127.0.0.1", f.addr)}
	}
	switch {
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return "", nil, &txbox.ConfigError{Field: "--tls-cert, --tls-key (TXBOX_TLS_CERT, TXBOX_TLS_KEY)", Reason: "give both or neither"}
	case f.tlsCert != "":
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return "", nil, &txbox.ConfigError{Field: "--tls-cert, --tls-key (TXBOX_TLS_CERT, TXBOX_TLS_KEY)", Reason: err.Error()}
		}
		return token, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	case !loopback && !f.insecureHTTP:
		return "", nil, &txbox.ConfigError{Field: "--addr (TXBOX_ADDR)", Reason: fmt.Sprintf("%q is not a loopback address and the console has no TLS: the token and the login cookie would cross the network in clear; give --tls-cert and --tls-key, or --insecure-http when a TLS proxy in front of it terminates TLS", f.addr)}
	}
	return token, nil, nil
}

// checkToken reads the token from --token or --token-file.
func (f *uiFlags) checkToken() (token string, err error) {
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
	if token != "" && len(token) < console.MinTokenLength {
		field := "--token (TXBOX_TOKEN)"
		if f.tokenFile != "" {
			field = "--token-file (TXBOX_TOKEN_FILE)"
		}
		return "", &txbox.ConfigError{Field: field, Reason: fmt.Sprintf("the token has %d characters: want at least %d (e.g. openssl rand -hex 16)", len(token), console.MinTokenLength)}
	}
	return token, nil
}

// consoleURL is where to point a browser at the console listening on
// addr: an unspecified address (0.0.0.0, ::) is no address to browse to,
// so it names the loopback address and says what else is served.
func consoleURL(addr net.Addr, https bool) (url, note string) {
	scheme := "http"
	if https {
		scheme = "https"
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return fmt.Sprintf("%s://%s/", scheme, addr), ""
	}
	port := strconv.Itoa(tcp.Port)
	note = "listening on every interface"
	if h, err := os.Hostname(); err == nil && h != "" {
		note += ", e.g. " + scheme + "://" + net.JoinHostPort(h, port) + "/"
	}
	return fmt.Sprintf("%s://%s/", scheme, net.JoinHostPort("127.0.0.1", port)), note
}

func newUI(g *globals) *cobra.Command {
	f := &uiFlags{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the admin console (web pages and JSON API): backlog, dead letters, parked inbox events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, tlsConf, err := f.check()
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
			url, note := consoleURL(ln.Addr(), tlsConf != nil)
			if tlsConf != nil {
				ln = tls.NewListener(ln, tlsConf)
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
			if note != "" {
				note += "; "
			}
			fmt.Fprintf(cmd.OutOrStdout(), "txbox console on %s (%sdatabase %s)\n", url, note, redact.URL(g.db))
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address; anything but loopback requires --token or --token-file, and --tls-cert/--tls-key or --insecure-http")
	fl.StringVar(&f.token, "token", "", fmt.Sprintf("token every client must present, at least %d characters (prefer TXBOX_TOKEN or --token-file: flags show in ps)", console.MinTokenLength))
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the token")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve the console over HTTPS, with --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.BoolVar(&f.insecureHTTP, "insecure-http", false, "serve plain HTTP off loopback (a TLS proxy in front terminates TLS); without it a non-loopback --addr needs --tls-cert and --tls-key")
	fl.BoolVar(&f.readOnly, "read-only", false, "hide replay and purge; the API answers them 403")
	fl.DurationVar(&f.sampleEvery, "sample-every", 10*time.Second, "how often to count rows for the overview's chart (a full count of the outbox table)")
	return cmd
}
