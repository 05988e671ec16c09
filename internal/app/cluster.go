package app

import (
	"crypto/tls"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
)

// clusterOptions are the go-redis options every Redis Cluster client of
// the node starts from (the store's, the key store's): the seeds of
// store.cluster_addrs, with the credentials and TLS their URL entries give
// (config.Store.ClusterSeeds). The caller adds pool sizes and timeouts.
// Errors: cluster_addrs that do not validate (Validate refuses them first).
func clusterOptions(s config.Store) (*redis.ClusterOptions, error) {
	seeds, err := s.ClusterSeeds()
	if err != nil {
		return nil, err
	}
	o := &redis.ClusterOptions{Addrs: seeds.Addrs, Username: seeds.Username, Password: seeds.Password}
	if seeds.TLS {
		// As go-redis's ParseURL and ParseClusterURL: TLS 1.2 at least,
		// every node's certificate checked against the first URL's host.
		o.TLSConfig = &tls.Config{ServerName: seeds.TLSServerName, MinVersion: tls.VersionTLS12}
	}
	return o, nil
}
