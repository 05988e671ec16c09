package config

import _ "embed"

// DefaultYAML is the embedded default configuration (config/default.yaml):
// the in-memory store, one development key, and the mock upstream on
// 127.0.0.1:8081. `llmguard serve` runs it when no --config is given.
//
//go:embed default.yaml
var DefaultYAML []byte

// Default parses DefaultYAML. Errors: none unless the embedded file is
// broken, which a test guards.
func Default() (*Config, error) { return Parse(DefaultYAML) }
