package httpapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/httpapi"
	"github.com/ledgerq/ledgerq/internal/testcert"
)

// writeCertificate writes a self-signed certificate for 127.0.0.1 and its
// key into dir and returns their paths and a pool that trusts it.
func writeCertificate(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	p := testcert.New(t, "ledgerq test", "127.0.0.1")
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, p.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, p.KeyPEM, 0o600))
	roots = x509.NewCertPool()
	roots.AddCert(p.Leaf)
	return certFile, keyFile, roots
}

// With a certificate and key the API serves HTTPS itself, and plain HTTP
// gets no answer from the handler.
func TestListen_ACertificateAndKeyServeHTTPS(t *testing.T) {
	t.Parallel()
	cfg := httpapi.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	var roots *x509.CertPool
	cfg.TLSCertFile, cfg.TLSKeyFile, roots = writeCertificate(t, t.TempDir())
	srv, ln, err := cfg.Listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "not over TLS", http.StatusTeapot)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	plain, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + ln.Addr().String() + "/healthz")
	if err == nil {
		_ = plain.Body.Close()
		require.NotEqual(t, http.StatusNoContent, plain.StatusCode, "plain HTTP must not reach the handler")
	}
}

// A certificate that does not load stops the listener with the file named.
func TestListen_ACertificateThatDoesNotLoadIsAnError(t *testing.T) {
	t.Parallel()
	cfg := httpapi.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(t.TempDir(), "missing.pem"), filepath.Join(t.TempDir(), "key.pem")
	_, _, err := cfg.Listen(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "missing.pem")
}
