package app

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/config"
)

// certResync is how often a served certificate's files are read again even
// when no file event arrived (a watch can miss a change on some file
// systems, or lose its directory to a remount).
const certResync = time.Minute

// maxPEMBytes bounds a certificate or key file read: a PEM chain of a few
// certificates is a few KiB; a path pointed at something else must not be
// read whole into memory.
const maxPEMBytes = 1 << 20

// tlsMetrics counts certificate loads and exposes when each listener's
// certificate expires.
type tlsMetrics struct {
	reloads *prometheus.CounterVec // llmguard_tls_reloads_total{listener,result}
	expiry  *prometheus.GaugeVec   // llmguard_tls_certificate_expiry_timestamp_seconds{listener}
}

func newTLSMetrics(reg prometheus.Registerer) *tlsMetrics {
	m := &tlsMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmguard_tls_reloads_total",
			Help: "Loads of a listener's TLS certificate and key, at start and after a change of their files (result: ok, failed; a failed load keeps the running certificate).",
		}, []string{"listener", "result"}),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llmguard_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificate a listener serves expires (its leaf's NotAfter), in Unix seconds.",
		}, []string{"listener"}),
	}
	reg.MustRegister(m.reloads, m.expiry)
	return m
}

// certSource serves one listener's certificate and swaps it when its files
// change. Connections already open keep the certificate they started with.
type certSource struct {
	listener          string // "proxy" or "admin", the metrics' label
	certFile, keyFile string
	log               *slog.Logger
	m                 *tlsMetrics

	cert atomic.Pointer[tls.Certificate]
	mu   sync.Mutex // serialises reload; guards last
	last [2][]byte  // the files' bytes last loaded

	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// newCertSource loads t's pair. Errors: a file cannot be read, or the pair
// does not parse or match (the message names the files).
func newCertSource(listener string, t *config.TLS, log *slog.Logger, m *tlsMetrics) (*certSource, error) {
	s := &certSource{listener: listener, certFile: t.CertFile, keyFile: t.KeyFile, log: log, m: m, done: make(chan struct{})}
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// loadPair reads and checks a certificate pair the way newCertSource does,
// for `llmguard validate`. Errors as newCertSource's.
func loadPair(t *config.TLS) (*tls.Certificate, error) {
	certPEM, err := readPEM(t.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEM(t.KeyFile)
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s with %s: %w", t.CertFile, t.KeyFile, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", t.CertFile, err)
		}
	}
	return &c, nil
}

// readPEM reads a certificate or key file: a regular file of at most
// maxPEMBytes. A FIFO is refused without waiting for a writer (its open
// would otherwise hold the watcher, and so a shutdown, forever).
func readPEM(path string) ([]byte, error) {
	b, err := config.ReadFile(path, maxPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PEM certificate or key", err)
	}
	return b, nil
}

// reload reads both files and, when either changed since the last load,
// parses the pair and serves it to new connections. changed is false when
// the files are as they were. A pair that does not load leaves the running
// certificate in force and is returned as the error (counted as failed).
func (s *certSource) reload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	certPEM, err := readPEM(s.certFile)
	if err == nil {
		var keyPEM []byte
		keyPEM, err = readPEM(s.keyFile)
		if err == nil {
			if bytes.Equal(certPEM, s.last[0]) && bytes.Equal(keyPEM, s.last[1]) {
				return false, nil
			}
			var c *tls.Certificate
			if c, err = loadPair(&config.TLS{CertFile: s.certFile, KeyFile: s.keyFile}); err == nil {
				s.cert.Store(c)
				s.last = [2][]byte{certPEM, keyPEM}
				s.m.expiry.WithLabelValues(s.listener).Set(float64(c.Leaf.NotAfter.Unix()))
				s.m.reloads.WithLabelValues(s.listener, "ok").Inc()
				return true, nil
			}
		}
	}
	s.m.reloads.WithLabelValues(s.listener, "failed").Inc()
	return false, fmt.Errorf("tls (%s listener): %w", s.listener, err)
}

// getCertificate is tls.Config.GetCertificate: the pair loaded last.
func (s *certSource) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cert.Load(), nil
}

// config is the listener's TLS configuration: TLS 1.2 or later (RFC 8996
// retires 1.0 and 1.1), HTTP/1.1 only (fasthttp speaks no HTTP/2), the
// certificate read per handshake from s.
func (s *certSource) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: s.getCertificate}
}

// listen wraps ln so that each accepted connection speaks TLS.
func (s *certSource) listen(ln net.Listener) net.Listener { return tls.NewListener(ln, s.config()) }

// watch reloads the pair when a file in either file's directory changes
// (after 100 ms without more events, as a renewal writes both files), and
// every certResync regardless. A failed reload is logged and retried at the
// next event or resync. It returns at once; stop ends it.
func (s *certSource) watch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	for _, d := range uniqueDirs(s.certFile, s.keyFile) {
		if err := w.Add(d); err != nil {
			w.Close()
			return err
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer w.Close()
		resync := time.NewTicker(certResync)
		defer resync.Stop()
		var debounce <-chan time.Time
		for {
			select {
			case <-s.done:
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				if debounce == nil {
					debounce = time.After(100 * time.Millisecond)
				}
				continue
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				s.log.Error("tls: watching the certificate files", "listener", s.listener, "err", err)
				continue
			case <-debounce:
				debounce = nil
			case <-resync.C:
			}
			if changed, err := s.reload(); err != nil {
				s.log.Error("tls: certificate reload refused; the running certificate stays in force", "listener", s.listener, "err", err)
			} else if changed {
				c := s.cert.Load()
				s.log.Info("tls: certificate reloaded", "listener", s.listener, "subject", c.Leaf.Subject.String(), "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
			}
		}
	}()
	return nil
}

// stop ends watch; it may be called more than once.
func (s *certSource) stop() error {
	s.once.Do(func() { close(s.done); s.wg.Wait() })
	return nil
}

func uniqueDirs(paths ...string) []string {
	var dirs []string
	for _, p := range paths {
		d := filepath.Dir(p)
		if len(dirs) == 0 || dirs[len(dirs)-1] != d {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
