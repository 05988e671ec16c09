package config

import (
	"errors"
	"fmt"
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

// An explicit max_connections must lie in the range the README states
// (64..65536); 0 asks for the default. Before, any positive value passed,
// so "max_connections: 4" refused a fifth caller and 10,000,000 lifted the
// read buffers' bound.
func TestMaxConnectionsRange(t *testing.T) {
	base := "upstreams:\n  - {name: openai, flavor: openai, base_url: \"https://api.openai.com\"}\n"
	for _, tc := range []struct {
		value int
		ok    bool
	}{
		{0, true}, {64, true}, {1024, true}, {65536, true},
		{-1, false}, {1, false}, {4, false}, {63, false}, {65537, false}, {10000000, false},
	} {
		c, err := Parse([]byte(base + fmt.Sprintf("max_connections: %d\n", tc.value)))
		if tc.ok {
			if err != nil {
				t.Errorf("max_connections %d: %v, want accepted", tc.value, err)
			} else if c.MaxConnections != tc.value {
				t.Errorf("max_connections %d: kept %d", tc.value, c.MaxConnections)
			}
			continue
		}
		want := fmt.Sprintf("config: line 3: max_connections: must be 0 (half the file-descriptor limit) or between 64 and 65536 (got %d)", tc.value)
		if err == nil || err.Error() != want {
			t.Errorf("max_connections %d: err = %v, want %q", tc.value, err, want)
		}
	}
}

// memory_limit_bytes is 0 (derived), -1 (none) or at least 32 MiB.
func TestMemoryLimitBytes(t *testing.T) {
	base := "upstreams:\n  - {name: openai, flavor: openai, base_url: \"https://api.openai.com\"}\n"
	for _, tc := range []struct {
		value int64
		ok    bool
	}{{0, true}, {-1, true}, {32 << 20, true}, {1 << 30, true}, {-2, false}, {1, false}, {32<<20 - 1, false}} {
		c, err := Parse([]byte(base + fmt.Sprintf("memory_limit_bytes: %d\n", tc.value)))
		switch {
		case tc.ok && err != nil:
			t.Errorf("memory_limit_bytes %d: %v, want accepted", tc.value, err)
		case tc.ok && c.MemoryLimitBytes != tc.value:
			t.Errorf("memory_limit_bytes %d: kept %d", tc.value, c.MemoryLimitBytes)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "memory_limit_bytes: must be 0 (derived from the budgets), -1 (no limit) or at least 33554432 bytes")):
			t.Errorf("memory_limit_bytes %d: err = %v, want the field and its range", tc.value, err)
		}
	}
}
