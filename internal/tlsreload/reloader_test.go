package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/clock"
	"github.com/ledgerq/ledgerq/internal/testcert"
	"github.com/ledgerq/ledgerq/internal/testlog"
)

const (
	serverName    = "ledgerq.test"
	checkInterval = time.Minute
)

// pair is a self-signed certificate for serverName and its key.
type pair = testcert.Pair

func newPair(t *testing.T, name string) pair {
	t.Helper()
	return testcert.New(t, name, serverName)
}

// replace puts data at path as a rotation does: written beside it, then
// renamed over it.
func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

type bundle struct {
	a, b              pair
	certFile, keyFile string
	clock             *clock.Fake
	logs              *recorder
	reloader          *Reloader
	server            *httptest.Server
}

// setup serves HTTPS from a Reloader whose files hold pair a.
func setup(t *testing.T) bundle {
	t.Helper()
	dir := t.TempDir()
	b := bundle{
		a: newPair(t, "cert A"), b: newPair(t, "cert B"),
		certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"),
		clock: clock.NewFake(time.Now()), logs: &recorder{},
	}
	replace(t, b.certFile, b.a.CertPEM)
	replace(t, b.keyFile, b.a.KeyPEM)
	r, err := New(Config{CertFile: b.certFile, KeyFile: b.keyFile, CheckInterval: checkInterval, Clock: b.clock}, slog.New(b.logs))
	require.NoError(t, err)
	b.reloader = r
	b.server = serve(t, r)
	return b
}

// serve serves HTTPS with r's TLSConfig.
func serve(t *testing.T, r *Reloader) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, "ok")
	}))
	srv.TLS = r.TLSConfig()
	// The handshakes that tests make fail on purpose.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// get makes a request on a new connection (a new handshake) from a client
// that trusts only the certificates given, and returns the certificate the
// server presented.
func (b bundle) get(t *testing.T, trusted ...pair) (*x509.Certificate, error) {
	t.Helper()
	roots := x509.NewCertPool()
	for _, p := range trusted {
		roots.AddCert(p.Leaf)
	}
	var presented *x509.Certificate
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: serverName,
			VerifyConnection: func(cs tls.ConnectionState) error {
				presented = cs.PeerCertificates[0]
				return nil
			},
		},
	}}
	resp, err := client.Get(b.server.URL)
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		return verr.UnverifiedCertificates[0], err
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return presented, nil
}

func (b bundle) requirePresents(t *testing.T, want pair) {
	t.Helper()
	presented, err := b.get(t, want)
	require.NoError(t, err)
	require.True(t, want.Leaf.Equal(presented), "presented %q, want %q", presented.Subject.CommonName, want.Leaf.Subject.CommonName)
}

func TestReloader_PresentsARotatedPairAtTheFirstHandshakeOfTheNextCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.requirePresents(t, b.a)

	replace(t, b.certFile, b.b.CertPEM)
	replace(t, b.keyFile, b.b.KeyPEM)
	b.clock.Advance(checkInterval - time.Second)
	b.requirePresents(t, b.a) // not checked yet

	b.clock.Advance(time.Second)
	presented, err := b.get(t, b.a)
	var verr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &verr, "a client trusting only A refuses B")
	require.True(t, b.b.Leaf.Equal(presented))
	b.requirePresents(t, b.b)
	require.Equal(t, []string{"INFO tlsreload: certificate reloaded"}, b.logs.messages())

	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.b)
	require.Len(t, b.logs.messages(), 1, "unchanged files are not loaded again")
}

func TestReloader_FollowsSymlinksToTheFilesTheyPointAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A Kubernetes secret volume: tls.crt -> ..data/tls.crt, and an update
	// swaps ..data to a new directory; the links named never change.
	// (certbot's live/ links are swapped one by one instead.)
	dir := t.TempDir()
	publish := func(version string, p pair) {
		versionDir := filepath.Join(dir, version)
		require.NoError(t, os.Mkdir(versionDir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(versionDir, "tls.crt"), p.CertPEM, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(versionDir, "tls.key"), p.KeyPEM, 0o600))
		require.NoError(t, os.Symlink(version, filepath.Join(dir, "..data_tmp")))
		require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	}
	publish("..v1", b.a)
	for _, name := range []string{"tls.crt", "tls.key"} {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	r, err := New(Config{
		CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		CheckInterval: checkInterval, Clock: b.clock,
	}, nil)
	require.NoError(t, err)
	b.server = serve(t, r)
	b.requirePresents(t, b.a)

	publish("..v2", b.b)
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.b)
}

func TestReloader_NoticesAFileRewrittenInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	later := time.Now().Add(time.Minute)
	for path, data := range map[string][]byte{b.certFile: b.b.CertPEM, b.keyFile: b.b.KeyPEM} {
		require.NoError(t, os.WriteFile(path, data, 0o600))
		// File times tick coarsely (a jiffy on Linux): a rewrite within
		// the test's few microseconds could keep the old one.
		require.NoError(t, os.Chtimes(path, later, later))
	}
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.b)
}

func TestReloader_KeepsItsCertificateWhileARotatedPairDoesNotLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// The certificate is rotated, its key not yet.
	replace(t, b.certFile, b.b.CertPEM)
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.a)
	require.Equal(t, []string{
		"ERROR tlsreload: the certificate files changed and do not load, serving the previous certificate: " +
			"certificate " + b.certFile + " with key " + b.keyFile + ": tls: private key does not match public key",
	}, b.logs.messages())

	// Tried again at each check, reported again.
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.a)
	require.Len(t, b.logs.messages(), 2)

	require.NoError(t, os.Remove(b.keyFile))
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.a)
	require.Contains(t, b.logs.messages()[2], "key file: stat "+b.keyFile+": no such file or directory")

	replace(t, b.keyFile, []byte("not PEM"))
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.a)
	require.Contains(t, b.logs.messages()[3], "tls: failed to find any PEM data in key input")

	replace(t, b.keyFile, b.b.KeyPEM)
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.b)
	require.Equal(t, "INFO tlsreload: certificate reloaded", b.logs.messages()[4])
}

func TestReloader_AClockGoneBackDoesNotPostponeTheCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replace(t, b.certFile, b.b.CertPEM)
	replace(t, b.keyFile, b.b.KeyPEM)
	b.clock.Advance(-time.Hour)
	b.requirePresents(t, b.b)
}

func TestReloader_ConcurrentHandshakesDuringRotationsAlwaysGetAPair(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	var handshakes, without atomic.Int64
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cert, err := b.reloader.GetCertificate(&tls.ClientHelloInfo{ServerName: serverName})
				handshakes.Add(1)
				if err != nil || cert == nil || cert.Leaf == nil {
					without.Add(1)
				}
			}
		})
	}
	// Each rotation waits for a handshake after the last one, so that
	// handshakes run between and during rotations even on a busy machine
	// (where the rotations could otherwise all end before one handshake).
	seen := int64(0)
	awaitHandshake := func() {
		for handshakes.Load() == seen {
			runtime.Gosched()
		}
		seen = handshakes.Load()
	}
	for i := range 50 {
		awaitHandshake()
		next := []pair{b.a, b.b}[i%2]
		replace(t, b.certFile, next.CertPEM)
		replace(t, b.keyFile, next.KeyPEM)
		b.clock.Advance(checkInterval)
	}
	awaitHandshake()
	close(stop)
	wg.Wait()
	require.Positive(t, handshakes.Load())
	require.Zero(t, without.Load(), "handshakes given no certificate")
	b.clock.Advance(checkInterval)
	b.requirePresents(t, b.b)
}

func TestReloader_TLSConfigRefusesTLSBelow1_2(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Go's servers refuse below 1.2 by default too, unless GODEBUG
	// tls10server=1 says otherwise; an explicit minimum holds either way.
	require.Equal(t, uint16(tls.VersionTLS12), b.reloader.TLSConfig().MinVersion)
	conn, err := tls.Dial("tcp", b.server.Listener.Addr().String(), &tls.Config{
		ServerName: serverName, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true,
	})
	if err == nil {
		conn.Close()
	}
	require.ErrorContains(t, err, "protocol version not supported")
}

func TestNew_NamesTheFileThatDoesNotLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := newPair(t, "cert A"), newPair(t, "cert B")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	otherKey, notPEM := filepath.Join(dir, "other.key"), filepath.Join(dir, "garbage.pem")
	replace(t, certFile, a.CertPEM)
	replace(t, keyFile, a.KeyPEM)
	replace(t, otherKey, b.KeyPEM)
	replace(t, notPEM, []byte("-----BEGIN NOTHING"))
	missing := filepath.Join(dir, "missing.crt")

	for _, c := range []struct{ cert, key, want string }{
		{missing, keyFile, "tlsreload: certificate file: stat " + missing + ": no such file or directory"},
		{certFile, missing, "tlsreload: key file: stat " + missing + ": no such file or directory"},
		{dir, keyFile, "tlsreload: reading the certificate file: read " + dir + ": is a directory"},
		{certFile, otherKey, "tlsreload: certificate " + certFile + " with key " + otherKey + ": tls: private key does not match public key"},
		{notPEM, keyFile, "tlsreload: certificate " + notPEM + " with key " + keyFile + ": tls: failed to find any PEM data in certificate input"},
		{"", "", "TLS certificate file is not set\nTLS key file is not set"},
	} {
		_, err := New(Config{CertFile: c.cert, KeyFile: c.key}, nil)
		require.EqualError(t, err, c.want)
	}

	_, err := New(Config{CertFile: certFile, KeyFile: keyFile, CheckInterval: -time.Second}, nil)
	require.EqualError(t, err, "TLS check interval must not be negative, got -1s")
	r, err := New(Config{CertFile: certFile, KeyFile: keyFile}, nil)
	require.NoError(t, err)
	require.Equal(t, defaultCheckInterval, r.cfg.CheckInterval)
}

func TestSameFile_IsTheSameInodeSizeTimeAndMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mtime := time.Now().Add(-time.Hour)
	write := func(name, data string) (string, os.FileInfo) {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
		require.NoError(t, os.Chtimes(path, mtime, mtime))
		info, err := os.Stat(path)
		require.NoError(t, err)
		return path, info
	}
	path, info := write("a", "same size")
	again, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, sameFile(info, again))

	// Copied in with its time kept (cp -p, rsync -t, tar): only the inode
	// tells.
	_, other := write("b", "SAME SIZE")
	require.NoError(t, os.Rename(filepath.Join(dir, "b"), path))
	renamed, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, info.Size(), renamed.Size())
	require.Equal(t, info.ModTime(), renamed.ModTime())
	require.True(t, sameFile(other, renamed))
	require.False(t, sameFile(info, renamed))

	// A chmod can make an unreadable pair readable.
	require.NoError(t, os.Chmod(path, 0o644))
	chmodded, err := os.Stat(path)
	require.NoError(t, err)
	require.False(t, sameFile(renamed, chmodded))
}

// recorder keeps the log's records, written by the server's handshakes and
// read by the test.
type recorder struct{ testlog.Recorder }

// messages returns each record's level and message, and its error if any.
func (h *recorder) messages() []string {
	var out []string
	for _, r := range h.Records() {
		m := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" {
				m += ": " + a.Value.String()
			}
			return true
		})
		out = append(out, m)
	}
	return out
}
