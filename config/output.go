package config

import (
	"cmp"

	"github.com/llmguard/llmguard/reserve"
	"github.com/llmguard/llmguard/spec"
)

// checkCapOutput checks a limit's cap_output and cap_output_min: lowering
// a request's output maximum changes what it costs only in units that
// count output (tokens, output_tokens, usd).
func checkCapOutput(p *problems, f string, l Limit, unit spec.Unit) {
	if l.CapOutputMin < 0 || l.CapOutputMin > maxUnits {
		p.add(f+".cap_output_min", "must be a positive number of tokens (got %d)", l.CapOutputMin)
	}
	if l.CapOutputMin != 0 && !l.CapOutput {
		p.add(f+".cap_output_min", "is set but cap_output is not")
	}
	if l.CapOutput && unit != spec.UnitTokens && unit != spec.UnitOutputTokens && unit != spec.UnitUSD {
		p.add(f+".cap_output", "only a limit counting tokens, output_tokens or usd can lower a request's output (unit %s)", l.Unit)
	}
}

// checkOutputReservation checks output_reservation.
func checkOutputReservation(p *problems, o OutputReservation) {
	const f = "output_reservation"
	if o.Quantile != 0 && !(o.Quantile > 0 && o.Quantile < 1) {
		p.add(f+".quantile", "must be between 0 and 1, exclusive (got %v)", o.Quantile)
	}
	if o.MinSamples < 0 {
		p.add(f+".min_samples", "must be positive (got %d)", o.MinSamples)
	}
	if o.Floor < 0 || o.Floor > maxUnits {
		p.add(f+".floor", "must be a positive number of tokens (got %d)", o.Floor)
	}
	if o.Cap < 0 || o.Cap > maxUnits {
		p.add(f+".cap", "must be a positive number of tokens (got %d)", o.Cap)
	}
	if lo, hi := cmp.Or(o.Floor, reserve.DefaultFloor), cmp.Or(o.Cap, reserve.DefaultCap); lo > hi {
		p.add(f+".floor", "must not exceed cap (%d > %d; unset, they are %d and %d)", lo, hi, reserve.DefaultFloor, reserve.DefaultCap)
	}
	if o.HalfLife < 0 {
		p.add(f+".half_life", "must be positive (got %d)", o.HalfLife)
	}
	if o.MaxModels < 0 {
		p.add(f+".max_models", "must be positive (got %d)", o.MaxModels)
	}
}
