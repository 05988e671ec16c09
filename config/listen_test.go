package config

import (
	"strings"
	"testing"
)

// TestListenersThatCannotBothOpenAreNamed: a config whose admin listener
// overlaps the proxy's (one port, the same or a wildcard host) or names a
// port past 65535 validated OK and then stopped serve at start with "address
// already in use" or "invalid port"; validate names the field instead.
func TestListenersThatCannotBothOpenAreNamed(t *testing.T) {
	for _, tc := range []struct {
		name, listen, admin, problem string
	}{
		{name: "same address", listen: "127.0.0.1:18180", admin: "127.0.0.1:18180", problem: "admin_listen: 127.0.0.1:18180 overlaps listen"},
		{name: "wildcard proxy", listen: ":18180", admin: "127.0.0.1:18180", problem: "admin_listen: 127.0.0.1:18180 overlaps listen"},
		{name: "wildcard admin", listen: "10.0.0.1:18180", admin: "0.0.0.0:18180", problem: "admin_listen: 0.0.0.0:18180 overlaps listen"},
		{name: "localhost and 127.0.0.1", listen: "localhost:18180", admin: "127.0.0.1:18180", problem: "admin_listen: 127.0.0.1:18180 overlaps listen (localhost:18180)"},
		{name: "LOCALHOST twice", listen: "LOCALHOST:18180", admin: "localhost:18180", problem: "admin_listen: localhost:18180 overlaps listen"},
		{name: "localhost and ::1", listen: "localhost:18180", admin: "[::1]:18180"},
		{name: "port out of range", listen: "127.0.0.1:99999", admin: "127.0.0.1:9090", problem: "listen: port 99999 is out of range"},
		{name: "distinct ports", listen: "127.0.0.1:18180", admin: "127.0.0.1:18190"},
		{name: "one port, two hosts", listen: "10.0.0.1:18180", admin: "127.0.0.1:18180"},
		{name: "both chosen by the system", listen: "127.0.0.1:0", admin: "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(observeBase + "listen: \"" + tc.listen + "\"\nadmin_listen: \"" + tc.admin + "\"\n"))
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("%s / %s refused: %v", tc.listen, tc.admin, err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
				t.Errorf("%s / %s: want a problem %q, got %v", tc.listen, tc.admin, tc.problem, err)
			}
		})
	}
}
