package spec

// ServiceTier is the processing tier a request asks for, which decides its
// price (OpenAI's service_tier request field,
// https://platform.openai.com/docs/api-reference/chat/create; a config's
// default_service_tier). The zero value is TierStandard.
type ServiceTier uint8

// Service tiers, in the order of tierNames.
const (
	// TierStandard is OpenAI's "default" tier (also "scale" and any value
	// OpenAI does not price differently).
	TierStandard ServiceTier = iota
	// TierPriority is "priority": faster, at a premium
	// (https://openai.com/api-priority-processing/).
	TierPriority
	// TierFlex is "flex": slower, at Batch API rates
	// (https://developers.openai.com/api/docs/guides/flex-processing).
	TierFlex
)

// tierNames is each ServiceTier's name as OpenAI spells it, indexed by its
// value: the one table of tiers.
var tierNames = names[ServiceTier]{TierStandard: "default", TierPriority: "priority", TierFlex: "flex"}

// String is the tier's name as OpenAI spells it ("default", "priority",
// "flex"); a value outside the enum is "unknown(<n>)".
func (t ServiceTier) String() string { return tierNames.of(t) }

// ParseServiceTier returns the ServiceTier named s exactly as String names
// it (what default_service_tier accepts); false if none is. An answer's or
// a request's other spellings ("scale", "auto", Groq's "on_demand") are
// package policy's to price (Policy.TierOf).
func ParseServiceTier(s string) (ServiceTier, bool) { return tierNames.parse(s) }

// ServiceTierNames returns every tier's name in value order: "default",
// "priority", "flex" (a fresh slice the caller may keep).
func ServiceTierNames() []string { return tierNames.list() }
