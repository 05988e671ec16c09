package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ClusterSeeds is what store.cluster_addrs says about a Redis Cluster: its
// seed nodes, and the credentials and TLS every node of it is reached with.
// An entry of cluster_addrs is either host:port, or a redis:// or rediss://
// URL (redis://user:password@host:port) for a cluster that needs a password
// (requirepass, an ACL user) or TLS: go-redis's ClusterOptions take one
// Username, Password and TLSConfig for every node, as its own
// ParseClusterURL reads them from one URL (go-redis v9 osscluster.go), so
// the URL entries must agree on them. The zero value is no seed.
type ClusterSeeds struct {
	// Addrs are the seeds as host:port, in the order given.
	Addrs []string
	// Username and Password are the URL entries' user information
	// (Redis 6 ACL user and password; a password alone, redis://:pw@…,
	// for requirepass); both empty without.
	Username, Password string
	// TLS is true when the entries are rediss:// URLs. TLSServerName is
	// then the host of the first URL entry, checked against every node's
	// certificate, as go-redis's ParseClusterURL sets it (a managed
	// cluster's nodes share a certificate valid for that name).
	TLS           bool
	TLSServerName string
}

// ClusterSeeds reads s.ClusterAddrs. Errors name the first bad entry with
// its index (store.cluster_addrs[i]: …), its password redacted: an entry that
// is neither host:port nor a redis:// or rediss:// URL with a host:port and
// at most the database 0 as its path (a cluster has no other) and no query,
// or a URL entry whose scheme or user information differs from an earlier
// one's.
func (s Store) ClusterSeeds() (ClusterSeeds, error) {
	seeds, field, problem := s.clusterSeeds()
	if problem != "" {
		return ClusterSeeds{}, fmt.Errorf("%s: %s", field, problem)
	}
	return seeds, nil
}

// clusterSeeds is ClusterSeeds with a problem given apart from its field,
// for Validate's list; problem is "" when there is none.
func (s Store) clusterSeeds() (seeds ClusterSeeds, field, problem string) {
	first := -1 // the first URL entry
	for i, a := range s.ClusterAddrs {
		field = fmt.Sprintf("store.cluster_addrs[%d]", i)
		if !strings.Contains(a, "://") {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return ClusterSeeds{}, field, fmt.Sprintf("must be host:port, or a redis:// or rediss:// URL with credentials (got %q)", redactedURL(a))
			}
			seeds.Addrs = append(seeds.Addrs, a)
			continue
		}
		u, err := url.Parse(a)
		if err != nil {
			return ClusterSeeds{}, field, fmt.Sprintf("not a URL (%s)", redactedURLError(a))
		}
		shown := redactedURL(a)
		if u.Scheme != "redis" && u.Scheme != "rediss" {
			return ClusterSeeds{}, field, fmt.Sprintf("a URL entry must be redis:// or rediss:// (got %q)", shown)
		}
		if host, _, err := net.SplitHostPort(u.Host); err != nil || host == "" {
			return ClusterSeeds{}, field, fmt.Sprintf("the URL must name host:port (got %q)", shown)
		}
		if p := strings.TrimPrefix(u.Path, "/"); p != "" && p != "0" {
			return ClusterSeeds{}, field, fmt.Sprintf("a Redis Cluster has only database 0, so the URL can name no other (got %q)", shown)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return ClusterSeeds{}, field, fmt.Sprintf("the URL takes no query or fragment (got %q)", shown)
		}
		user := u.User.Username()
		pass, _ := u.User.Password()
		tls := u.Scheme == "rediss"
		if first < 0 {
			first = i
			seeds.Username, seeds.Password, seeds.TLS = user, pass, tls
			if tls {
				seeds.TLSServerName = u.Hostname()
			}
		} else if tls != seeds.TLS || user != seeds.Username || pass != seeds.Password {
			return ClusterSeeds{}, field, fmt.Sprintf("its scheme, user or password differs from store.cluster_addrs[%d]'s: every node of one cluster is reached alike (go-redis takes one set)", first)
		}
		seeds.Addrs = append(seeds.Addrs, u.Host)
	}
	return seeds, "", ""
}

// redactedURLError describes why raw did not parse without quoting its
// user information (url.Parse's error quotes the whole input).
func redactedURLError(raw string) string {
	return fmt.Sprintf("%q does not parse", redactedURL(raw))
}

// redactedURL is raw with a password in it replaced by xxxxx, for an error
// that quotes a URL the config gives (the errors go to the log and
// /readyz): the user information of a URL with a host, else everything
// before the last @, replaced.
func redactedURL(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	if u, err := url.Parse(raw); err == nil && u.Opaque == "" && u.Host != "" && u.User != nil &&
		!strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") { // else the last @ is past the authority
		u.User = url.User("xxxxx") // the user too: redis://password@host is a slip seen in the wild
		return u.String()
	}
	// Not a URL with an authority (a typo such as redis:/:pw@h:1, or
	// control characters): anything before the last @ may be user
	// information, the scheme included.
	return "xxxxx" + raw[at:]
}
