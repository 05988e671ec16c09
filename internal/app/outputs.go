package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/reserve"
)

// openOutputs builds the learner of output reservations when the config
// turns it on (output_reservation.learn) and registers its metrics; nil
// otherwise. It lives as long as the process: a reload keeps what it
// learned, and its options are those read at start.
func openOutputs(cfg *config.Config, reg prometheus.Registerer) (*reserve.Learner, error) {
	o := cfg.OutputReservation
	if !o.Learn {
		return nil, nil
	}
	l, err := reserve.New(reserve.Options{Quantile: o.Quantile, MinSamples: o.MinSamples, Floor: o.Floor, Cap: o.Cap,
		HalfLife: o.HalfLife, MaxModels: o.MaxModels})
	if err != nil {
		return nil, fmt.Errorf("app: output_reservation: %w", err)
	}
	reg.MustRegister(reserve.NewCollector(l))
	return l, nil
}
