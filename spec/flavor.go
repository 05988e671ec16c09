package spec

// Flavor is an upstream's API shape, which decides how a caller's key is
// read, the shape of llmguard's error bodies and the rate-limit headers.
// The zero value is FlavorOpenAI.
type Flavor uint8

// Flavors llmguard speaks.
const (
	FlavorOpenAI    Flavor = iota // OpenAI and OpenAI-compatible APIs
	FlavorAnthropic               // Anthropic's Messages API
	FlavorAzure                   // Azure OpenAI: deployment paths, the api-key header
)

// flavorNames is the config name of each Flavor, indexed by its value: the
// one table of flavors.
var flavorNames = names[Flavor]{
	FlavorOpenAI:    "openai",
	FlavorAnthropic: "anthropic",
	FlavorAzure:     "azure",
}

// String is the flavor's config name, also its metric label and ledger
// field; a value outside the enum is "unknown(<n>)".
func (f Flavor) String() string { return flavorNames.of(f) }

// ParseFlavor returns the Flavor whose config name is s; false if none is.
func ParseFlavor(s string) (Flavor, bool) { return flavorNames.parse(s) }

// FlavorNames returns every flavor's config name, in value order (a fresh
// slice the caller may keep).
func FlavorNames() []string { return flavorNames.list() }
