// Package reserve learns how much output each model really produces, so
// that a request naming no output maximum reserves a high quantile of what
// that model has recently written instead of a fixed default.
//
// In the request flow it sits between weighing and the take: the meter asks
// a Learner for the reservation of a request whose body names no maximum
// (weigher.Estimate.OutputDefaulted) and feeds it, at settlement, the output
// the upstream reported for such requests. Each model has a Sketch: a
// fixed-size histogram of log-spaced buckets with exponential decay, so its
// memory never grows with traffic and old answers fade. Unpriced model names,
// which callers choose freely, share one sketch, and the number of sketches
// is capped, so no caller can grow the learner's memory.
package reserve
