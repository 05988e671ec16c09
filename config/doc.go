// Package config reads llmguard's YAML configuration: listeners, upstreams,
// virtual keys, models and prices, limits and the store. Parse validates the
// whole file at once and reports every problem with the path of its field
// (e.g. "limits[0].scope: …"); the rest of llmguard receives only validated,
// defaulted values.
package config
