package spec

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// enum is one of the package's enums seen through its table: String of
// each of the 256 values of its uint8, Parse and Names.
type enum struct {
	name   string
	str    func(v uint8) string
	parse  func(s string) (uint8, bool)
	names  []string
	consts []uint8 // every declared constant with a name
	// first is the value of names[0]; unnamed are declared values that
	// print "" and that no name parses to (PeriodNone).
	first   uint8
	unnamed []uint8
}

func enums() []enum {
	return []enum{
		{"Unit", func(v uint8) string { return Unit(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseUnit(s); return uint8(u), ok },
			UnitNames(), []uint8{uint8(UnitRequests), uint8(UnitTokens), uint8(UnitInputTokens), uint8(UnitOutputTokens), uint8(UnitUSD), uint8(UnitConcurrent)}, 0, nil},
		{"Scope", func(v uint8) string { return Scope(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseScope(s); return uint8(u), ok },
			ScopeNames(), []uint8{uint8(ScopeKey), uint8(ScopeUser), uint8(ScopeTenant), uint8(ScopeGlobal)}, 0, nil},
		{"Flavor", func(v uint8) string { return Flavor(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseFlavor(s); return uint8(u), ok },
			FlavorNames(), []uint8{uint8(FlavorOpenAI), uint8(FlavorAnthropic), uint8(FlavorAzure)}, 0, nil},
		{"Period", func(v uint8) string { return Period(v).String() },
			func(s string) (uint8, bool) { u, ok := ParsePeriod(s); return uint8(u), ok },
			PeriodNames(), []uint8{uint8(PeriodDay), uint8(PeriodWeek), uint8(PeriodMonth)}, uint8(PeriodDay), []uint8{uint8(PeriodNone)}},
		{"Backend", func(v uint8) string { return Backend(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseBackend(s); return uint8(u), ok },
			BackendNames(), []uint8{uint8(BackendMemory), uint8(BackendRedis), uint8(BackendRedisCluster)}, 0, nil},
		{"FailureMode", func(v uint8) string { return FailureMode(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseFailureMode(s); return uint8(u), ok },
			FailureModeNames(), []uint8{uint8(FailOpen), uint8(FailClosed)}, 0, nil},
		{"ServiceTier", func(v uint8) string { return ServiceTier(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseServiceTier(s); return uint8(u), ok },
			ServiceTierNames(), []uint8{uint8(TierStandard), uint8(TierPriority), uint8(TierFlex)}, 0, nil},
		{"LogFormat", func(v uint8) string { return LogFormat(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseLogFormat(s); return uint8(u), ok },
			LogFormatNames(), []uint8{uint8(LogJSON), uint8(LogText)}, 0, nil},
		{"TraceProtocol", func(v uint8) string { return TraceProtocol(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseTraceProtocol(s); return uint8(u), ok },
			TraceProtocolNames(), []uint8{uint8(TraceGRPC), uint8(TraceHTTP)}, 0, nil},
		{"AlertFormat", func(v uint8) string { return AlertFormat(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseAlertFormat(s); return uint8(u), ok },
			AlertFormatNames(), []uint8{uint8(AlertJSON), uint8(AlertSlack)}, 0, nil},
		{"Algorithm", func(v uint8) string { return Algorithm(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseAlgorithm(s); return uint8(u), ok },
			AlgorithmNames(), []uint8{uint8(TokenBucket), uint8(SlidingWindow), uint8(FixedWindow)}, 0, nil},
		{"OnLimit", func(v uint8) string { return OnLimit(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseOnLimit(s); return uint8(u), ok },
			OnLimitNames(), []uint8{uint8(OnLimitFail), uint8(OnLimitWait)}, 0, nil},
		{"ChatOutputField", func(v uint8) string { return ChatOutputField(v).String() },
			func(s string) (uint8, bool) { u, ok := ParseChatOutputField(s); return uint8(u), ok },
			ChatOutputFieldNames(), []uint8{uint8(ChatMaxTokens), uint8(ChatMaxCompletionTokens)}, uint8(ChatMaxTokens), []uint8{uint8(ChatOutputAuto)}},
	}
}

// Every value of every enum: a declared constant prints its name, which
// parses back to it; Names lists each declared constant's name once, in
// value order; any other value prints "unknown(<n>)", never a valid name.
func TestEveryValueRoundTrips(t *testing.T) {
	for _, e := range enums() {
		if len(e.names) != len(e.consts) {
			t.Errorf("%s: Names() has %d entries %q, %d constants are declared", e.name, len(e.names), e.names, len(e.consts))
		}
		for i, n := range e.names {
			if slices.Index(e.names, n) != i {
				t.Errorf("%s: Names() lists %q twice: %q", e.name, n, e.names)
			}
		}
		for v := 0; v < 256; v++ {
			s := e.str(uint8(v))
			if slices.Contains(e.unnamed, uint8(v)) {
				if s != "" {
					t.Errorf("%s(%d).String() = %q, want \"\" (a value without a name)", e.name, v, s)
				}
				continue
			}
			if !slices.Contains(e.consts, uint8(v)) {
				if want := fmt.Sprintf("unknown(%d)", v); s != want {
					t.Errorf("%s(%d).String() = %q, want %q", e.name, v, s, want)
				}
				if _, ok := e.parse(s); ok {
					t.Errorf("%s: Parse(%q) accepted an out-of-range value's string", e.name, s)
				}
				continue
			}
			if k := v - int(e.first); k < 0 || k >= len(e.names) || e.names[k] != s {
				t.Errorf("%s(%d).String() = %q, not Names()[%d] of %q", e.name, v, s, k, e.names)
			}
			if got, ok := e.parse(s); !ok || got != uint8(v) {
				t.Errorf("%s: Parse(%q) = %d, %v; want %d, true", e.name, s, got, ok, v)
			}
		}
		for _, bad := range []string{"", "unknown", "Tokens", " key", "openai ", "usd\x00"} {
			if _, ok := e.parse(bad); ok {
				t.Errorf("%s: Parse(%q) accepted", e.name, bad)
			}
		}
	}
}

// Names returns a copy: a caller editing it does not change the table.
func TestNamesIsACopy(t *testing.T) {
	UnitNames()[0], ScopeNames()[0], FlavorNames()[0] = "x", "x", "x"
	PeriodNames()[0], BackendNames()[0], FailureModeNames()[0] = "x", "x", "x"
	if UnitRequests.String() != "requests" || ScopeKey.String() != "key" || FlavorOpenAI.String() != "openai" ||
		PeriodDay.String() != "day" || BackendMemory.String() != "memory" || FailOpen.String() != "open" {
		t.Errorf("editing a Names() slice changed the table: %v %v %v %v %v %v", UnitRequests, ScopeKey, FlavorOpenAI, PeriodDay, BackendMemory, FailOpen)
	}
}

func TestCountsTokens(t *testing.T) {
	for v := 0; v < 256; v++ {
		u := Unit(v)
		want := u == UnitTokens || u == UnitInputTokens || u == UnitOutputTokens
		if u.CountsTokens() != want {
			t.Errorf("%v.CountsTokens() = %v", u, !want)
		}
	}
}

// TestUnitAmount: amounts read as a caller reads them; micro-USD as exact
// dollars, to the micro-dollar, whatever the sign or size.
func TestUnitAmount(t *testing.T) {
	for _, c := range []struct {
		u    Unit
		n    int64
		want string
	}{
		{UnitTokens, 1200, "1200 tokens"},
		{UnitInputTokens, 5, "5 input tokens"},
		{UnitRequests, 3, "3 requests"},
		{UnitUSD, 34296, "$0.034296"},
		{UnitUSD, 0, "$0.000000"},
		{UnitUSD, 50_000_000, "$50.000000"},
		{UnitUSD, -1_500_000, "-$1.500000"},
		{UnitUSD, math.MinInt64, "-$9223372036854.775808"},
		{UnitUSD, math.MaxInt64, "$9223372036854.775807"},
	} {
		if got := c.u.Amount(c.n); got != c.want {
			t.Errorf("%v.Amount(%d) = %q, want %q", c.u, c.n, got, c.want)
		}
	}
}

// AmountUnit: USD amounts are named micro_usd wherever they are written
// as numbers; every other unit keeps its config name.
func TestAmountUnit(t *testing.T) {
	for v := 0; v < 256; v++ {
		u := Unit(v)
		want := u.String()
		if u == UnitUSD {
			want = "micro_usd"
		}
		if got := u.AmountUnit(); got != want {
			t.Errorf("%v.AmountUnit() = %q, want %q", u, got, want)
		}
	}
}
