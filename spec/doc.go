// Package spec defines, once, the closed vocabularies of an llmguard
// specification: what a limit counts (Unit), whose bucket it takes from
// (Scope), a quota's calendar period (Period), the service tier a request is
// priced at (ServiceTier), which API shape an upstream speaks (Flavor),
// which store holds the buckets (Backend) and what a limit does while that
// store cannot answer (FailureMode). Each is a typed constant set with a
// single table of config names, so config validation, policy compilation,
// the proxy's headers and errors, and the wiring in internal/app all derive
// from the same definition; adding a value means adding a constant and its
// row here. spec is a leaf: it imports only the standard library, so every
// other package may import it.
package spec
