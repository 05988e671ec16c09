package config

import (
	"path/filepath"
)

// TLS serves a listener over TLS (1.2 or later) with a certificate and
// private key read from PEM files. The files are watched: a certificate
// renewed in place (or a Kubernetes Secret's symlink swapped) is served to
// new connections without a restart; a pair that fails to load is logged,
// counted in llmguard_tls_reloads_total{result="failed"}, and the running
// certificate stays in force.
type TLS struct {
	// CertFile is the PEM certificate chain (leaf first), relative to the
	// config file's directory.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of the leaf, relative to the config
	// file's directory.
	KeyFile string `yaml:"key_file"`
}

// resolveTLS makes the TLS files' paths relative to dir absolute, as the
// README states for every path in the file.
func (c *Config) resolveTLS(dir string) {
	for _, t := range []*TLS{c.TLS, c.AdminTLS} {
		if t == nil || dir == "" {
			continue
		}
		if t.CertFile != "" && !filepath.IsAbs(t.CertFile) {
			t.CertFile = filepath.Join(dir, t.CertFile)
		}
		if t.KeyFile != "" && !filepath.IsAbs(t.KeyFile) {
			t.KeyFile = filepath.Join(dir, t.KeyFile)
		}
	}
}

// checkTLS refuses a tls section without both of its files. Whether the
// files hold a usable pair is checked when the listener starts (and by
// `llmguard validate`), not here: a config parses on a machine without them.
func checkTLS(p *problems, field string, t *TLS) {
	if t == nil {
		return
	}
	if t.CertFile == "" {
		p.add(field+".cert_file", "must name the PEM certificate file")
	}
	if t.KeyFile == "" {
		p.add(field+".key_file", "must name the PEM private key file")
	}
	if t.CertFile != "" && t.CertFile == t.KeyFile {
		p.add(field, "cert_file and key_file are the same file (%q); a combined PEM is not read: give each its own file", t.CertFile)
	}
}
