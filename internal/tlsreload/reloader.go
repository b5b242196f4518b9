// Package tlsreload serves TLS from a certificate file and a key file that
// are replaced on disk while the server runs (certbot, cert-manager), with no
// restart.
//
// The files are checked on handshakes, at most once per CheckInterval: the
// handshake that finds them changed (another inode, size, modification time
// or mode) loads them before it answers. There is no goroutine to start or
// stop, and a server with no clients has nothing to serve. Both files are
// followed through symbolic links, which is how certbot's live/ directory and
// a Kubernetes secret volume swap a pair at once.
//
// A pair that fails to load (a key written after its certificate, a file
// missing or unreadable) is logged and the certificate loaded last is served
// on; it is tried again at each check until it loads.
package tlsreload

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerq/ledgerq/internal/clock"
)

// Config configures a Reloader.
type Config struct {
	// CertFile holds the certificate chain in PEM, the server's first.
	CertFile string
	// KeyFile holds the certificate's private key in PEM.
	KeyFile string
	// CheckInterval is the least time between two checks of the files (30 s
	// by default): how long a replaced pair may wait before it is served.
	CheckInterval time.Duration
	// Clock tells the time (the wall clock by default).
	Clock clock.Clock
}

const defaultCheckInterval = 30 * time.Second

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.CertFile == "" {
		errs = append(errs, errors.New("TLS certificate file is not set"))
	}
	if c.KeyFile == "" {
		errs = append(errs, errors.New("TLS key file is not set"))
	}
	if c.CheckInterval < 0 {
		errs = append(errs, fmt.Errorf("TLS check interval must not be negative, got %s", c.CheckInterval))
	}
	return errors.Join(errs...)
}

// Reloader hands TLS handshakes the certificate in its files as they are
// now. It is safe for concurrent use.
type Reloader struct {
	cfg    Config
	logger *slog.Logger
	cert   atomic.Pointer[tls.Certificate]
	// nextCheck is the clock's reading, in Unix nanoseconds, before which
	// handshakes do not look at the files.
	nextCheck atomic.Int64
	// mu is held by the one handshake that checks the files; the others
	// meanwhile serve the certificate loaded.
	mu sync.Mutex
	// loaded is what the files were when the certificate served was read
	// from them; mu guards it.
	loaded pairInfo
}

// New loads cfg's certificate and key and returns a Reloader serving them,
// or an error naming the file that is missing or unreadable, or both when
// they do not make a pair.
func New(cfg Config, logger *slog.Logger) (*Reloader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.CheckInterval = cmp.Or(cfg.CheckInterval, defaultCheckInterval)
	cfg.Clock = cmp.Or[clock.Clock](cfg.Clock, clock.Real{})
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{cfg: cfg, logger: logger}
	cert, info, err := r.load()
	if err != nil {
		return nil, fmt.Errorf("tlsreload: %w", err)
	}
	r.cert.Store(cert)
	r.loaded = info
	r.nextCheck.Store(cfg.Clock.Now().UnixNano() + int64(cfg.CheckInterval))
	return r, nil
}

// GetCertificate returns the certificate to present, for tls.Config's field
// of that name. It never fails: while a replaced pair does not load, the
// previous certificate is presented.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.maybeReload()
	return r.cert.Load(), nil
}

// TLSConfig returns a new server tls.Config presenting r's certificate, with
// TLS 1.2 at least and Go's default cipher suites. Leave its Certificates
// empty (crypto/tls asks GetCertificate only then, or when the client sends
// a server name) and give http.Server.ServeTLS empty file names.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

// maybeReload loads the files when CheckInterval has passed since the last
// check and they changed since they were loaded.
func (r *Reloader) maybeReload() {
	now := r.cfg.Clock.Now().UnixNano()
	// A next check more than an interval away means the clock went back:
	// check now rather than wait for it to catch up.
	if next := r.nextCheck.Load(); now < next && next-now <= int64(r.cfg.CheckInterval) {
		return
	}
	if !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	r.nextCheck.Store(now + int64(r.cfg.CheckInterval))

	if info, err := stat(r.cfg.CertFile, r.cfg.KeyFile); err == nil && info.same(r.loaded) {
		return
	}
	cert, info, err := r.load()
	if err != nil {
		r.logger.Error("tlsreload: the certificate files changed and do not load, serving the previous certificate",
			"cert_file", r.cfg.CertFile, "key_file", r.cfg.KeyFile, "not_after", r.cert.Load().Leaf.NotAfter, "error", err)
		return
	}
	r.cert.Store(cert)
	r.loaded = info
	r.logger.Info("tlsreload: certificate reloaded",
		"cert_file", r.cfg.CertFile, "subject", cert.Leaf.Subject.String(), "dns_names", cert.Leaf.DNSNames,
		"not_after", cert.Leaf.NotAfter)
}

// load reads the pair. The files are looked at before they are read, so that
// a change while they are read shows at the next check.
func (r *Reloader) load() (*tls.Certificate, pairInfo, error) {
	info, err := stat(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return nil, pairInfo{}, err
	}
	certPEM, err := os.ReadFile(r.cfg.CertFile)
	if err != nil {
		return nil, pairInfo{}, fmt.Errorf("reading the certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(r.cfg.KeyFile)
	if err != nil {
		return nil, pairInfo{}, fmt.Errorf("reading the key file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, pairInfo{}, fmt.Errorf("certificate %s with key %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	if cert.Leaf == nil {
		// X509KeyPair leaves it out under GODEBUG x509keypairleaf=0.
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, pairInfo{}, fmt.Errorf("certificate %s: %w", r.cfg.CertFile, err)
		}
	}
	return &cert, info, nil
}

// pairInfo is what the files of a pair were at one time.
type pairInfo struct {
	cert, key os.FileInfo
}

func stat(certFile, keyFile string) (pairInfo, error) {
	cert, err := os.Stat(certFile)
	if err != nil {
		return pairInfo{}, fmt.Errorf("certificate file: %w", err)
	}
	key, err := os.Stat(keyFile)
	if err != nil {
		return pairInfo{}, fmt.Errorf("key file: %w", err)
	}
	return pairInfo{cert: cert, key: key}, nil
}

func (p pairInfo) same(q pairInfo) bool {
	return sameFile(p.cert, q.cert) && sameFile(p.key, q.key)
}

// sameFile reports whether a and b are one file, unchanged. The mode is
// compared too: a chmod can turn an unreadable pair readable.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}
