package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The transport limits have their documented defaults and are validated.
func TestTransportLimits(t *testing.T) {
	c, err := Parse([]byte(`
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxInflightResponseBytes != 256<<20 {
		t.Errorf("default max_inflight_response_bytes %d, want 256 MiB", c.MaxInflightResponseBytes)
	}
	if c.MaxInflightBodyBytes != 256<<20 || time.Duration(c.ClientWriteTimeout) != 30*time.Second ||
		time.Duration(c.Upstreams[0].IdleTimeout) != 4*time.Second {
		t.Errorf("defaults: max_inflight_body_bytes %d, client_write_timeout %v, idle_timeout %v",
			c.MaxInflightBodyBytes, c.ClientWriteTimeout, c.Upstreams[0].IdleTimeout)
	}

	_, err = Parse([]byte(`
max_body_bytes: 1000
max_inflight_body_bytes: 999
max_inflight_response_bytes: 65535
client_write_timeout: soon
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com", idle_timeout: -1s}
`))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want *Error, got %v", err)
	}
	for _, field := range []string{"max_inflight_body_bytes:", "max_inflight_response_bytes:", "client_write_timeout:", "upstreams[0].idle_timeout:"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("no problem reported for %s in %v", field, err)
		}
	}
}
