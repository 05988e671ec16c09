package app

import (
	"strings"
	"testing"
	"time"
)

func TestTimerSlackEnv(t *testing.T) {
	for _, c := range []struct {
		name, value string
		set         bool
		want        time.Duration
		err         string
	}{
		{name: "unset: the default", want: DefaultTimerSlack},
		{name: "empty: the default", set: true, value: "", want: DefaultTimerSlack},
		{name: "off", set: true, value: "off", want: 0},
		{name: "zero", set: true, value: "0", want: 0},
		{name: "a duration", set: true, value: "200us", want: 200 * time.Microsecond},
		{name: "spaces around", set: true, value: " 2ms ", want: 2 * time.Millisecond},
		{name: "the bound", set: true, value: "1s", want: time.Second},
		{name: "over the bound", set: true, value: "1.5s", err: "out of range"},
		{name: "negative", set: true, value: "-1ms", err: "out of range"},
		{name: "a bare number", set: true, value: "50000", err: "not a duration"},
	} {
		env := func(k string) (string, bool) {
			if k != TimerSlackEnv {
				t.Fatalf("%s: read %s", c.name, k)
			}
			return c.value, c.set
		}
		got, err := TimerSlack(env)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), TimerSlackEnv) {
				t.Errorf("%s: err %v, want one naming %s with %q", c.name, err, TimerSlackEnv, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
