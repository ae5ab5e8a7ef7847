package main_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

// txbox ui refuses to answer other machines without a token: exit 2 and
// one line naming --addr, before it opens anything.
func TestUIRefusesNonLoopbackWithoutToken(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abcde\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env   []string
		args  []string
		names string
	}{
		{nil, []string{"ui", "--addr", "0.0.0.0:8080", "--db", "postgres://u:hunter2@127.0.0.1:1/x"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", ":8080", "--db", "sqlite:///nonexistent/x.db"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "192.0.2.10:8080"}, "--addr (TXBOX_ADDR)"},
		{[]string{"TXBOX_ADDR=[::]:8080"}, []string{"ui"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "example.com:8080"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "no-port"}, "--addr (TXBOX_ADDR)"},
		{nil, []string{"ui", "--addr", "0.0.0.0:8080", "--token-file", missing}, "--token-file (TXBOX_TOKEN_FILE)"},
		{nil, []string{"ui", "--token", "a", "--token-file", missing}, "--token (TXBOX_TOKEN)"},
		{[]string{"TXBOX_SAMPLE_EVERY=10ms"}, []string{"ui"}, "--sample-every (TXBOX_SAMPLE_EVERY)"},
		// A token, but no TLS: the token would cross the network in clear.
		{[]string{"TXBOX_TOKEN=" + uiToken}, []string{"ui", "--addr", "0.0.0.0:8080", "--db", "postgres://u:hunter2@127.0.0.1:1/x"}, "--insecure-http"},
		{nil, []string{"ui", "--addr", "192.0.2.10:8080", "--token-file", short}, "--token-file (TXBOX_TOKEN_FILE): the token has 5 characters: want at least 16"},
		{nil, []string{"ui", "--token", "s3cret"}, "--token (TXBOX_TOKEN): the token has 6 characters"},
		{nil, []string{"ui", "--tls-cert", missing}, "--tls-cert, --tls-key"},
		{nil, []string{"ui", "--tls-cert", missing, "--tls-key", missing}, "--tls-cert, --tls-key"},
	} {
		out, code := run(t, c.env, c.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(out, c.names) {
			t.Fatalf("txbox %v %v: exit %d, want 2 and one line naming %s; got:\n%s", c.env, c.args, code, c.names, out)
		}
		if strings.Contains(out, "hunter2") {
			t.Fatalf("password printed: %s", out)
		}
	}
}

const uiToken = "s3cret-0123456789abcdef"

// startUI runs `txbox ui` with args and env and returns the URL its banner
// prints and the banner.
func startUI(t *testing.T, env []string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), append([]string{"ui"}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v", err)
	}
	// "txbox console on http://127.0.0.1:PORT/ (listening on every interface, ...; database ...)"
	f := strings.Fields(line)
	if len(f) < 4 {
		t.Fatalf("banner: %q", line)
	}
	return f[3], line
}

func migratedSQLite(t *testing.T) string {
	t.Helper()
	db := "sqlite://" + filepath.Join(t.TempDir(), "ui.db")
	if out, code := run(t, nil, "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: %d %s", code, out)
	}
	return db
}

// With a token (here from TXBOX_TOKEN) and --insecure-http a non-loopback
// address is allowed, and the console then wants the token. The banner's
// URL is one a browser can open: not the unspecified address.
func TestUIServesWithToken(t *testing.T) {
	db := migratedSQLite(t)
	u, banner := startUI(t, []string{"TXBOX_TOKEN=" + uiToken}, "--db", db, "--addr", "0.0.0.0:0", "--insecure-http")
	if !strings.HasPrefix(u, "http://127.0.0.1:") || strings.Contains(banner, "[::]") || strings.Contains(banner, "0.0.0.0") || !strings.Contains(banner, "every interface") {
		t.Fatalf("banner does not print a usable URL: %q", banner)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(token string) int {
		req, _ := http.NewRequest("GET", u+"api/overview", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(""); c != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", c)
	}
	if c := get("wrong"); c != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", c)
	}
	if c := get(uiToken); c != http.StatusOK {
		t.Fatalf("token: %d, want 200", c)
	}
}

// --tls-cert and --tls-key serve the console over HTTPS, off loopback
// without --insecure-http; the login cookie is Secure and is not the token.
func TestUIServesTLS(t *testing.T) {
	db := migratedSQLite(t)
	certFile, keyFile, pool := selfSigned(t)
	u, banner := startUI(t, []string{"TXBOX_TOKEN=" + uiToken}, "--db", db, "--addr", "0.0.0.0:0", "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(u, "https://127.0.0.1:") {
		t.Fatalf("banner: %q, want an https:// URL", banner)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(u+"login", url.Values{"token": {uiToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(ck) != 1 || !ck[0].Secure || strings.Contains(ck[0].Value, uiToken) {
		t.Fatalf("login over TLS: %d %+v, want 303 and one Secure cookie without the token", resp.StatusCode, ck)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get(strings.Replace(u, "https://", "http://", 1) + "login"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the TLS console answered plain HTTP")
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their files and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "txbox console test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
