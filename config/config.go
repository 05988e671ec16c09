package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmguard/llmguard/spec"
)

// Config is the whole llmguard configuration file, as written in YAML. Its
// field names are the public contract; Load fills defaults and validates.
// The zero value is not usable; build one with Load or Parse.
type Config struct {
	// Listen is the proxy's address (host:port). Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// AdminListen serves /healthz, /readyz and /metrics. Default 127.0.0.1:9090.
	AdminListen string `yaml:"admin_listen"`
	// MaxBodyBytes caps request bodies in bytes; larger ones get 413.
	// Default 8 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxJSONDepth is the most arrays and objects a JSON request body may
	// have open at once; a deeper body gets 400 (json_too_deep) and is not
	// forwarded. Upstream answers and SSE events nested deeper are relayed
	// but not read for usage. Checked by a flat scan before any parser
	// recurses. Default 128, at most 10000.
	MaxJSONDepth int `yaml:"max_json_depth"`
	// MaxInflightBodyBytes caps the request-body bytes held in memory by all
	// requests at once; a request whose body does not fit gets 503 with
	// Retry-After. At least MaxBodyBytes. Default 256 MiB (32 bodies of the
	// default MaxBodyBytes).
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
	// ClientWriteTimeout bounds each write to a client: one that accepts no
	// byte for this long is disconnected (a streamed answer's upstream
	// request is cancelled and the caller charged what was streamed).
	// Default 30s.
	ClientWriteTimeout Duration `yaml:"client_write_timeout"`
	// MaxRetryWait is the longest wait a 429 asks an SDK to sleep through:
	// a denial whose wait is longer also carries x-should-retry: false, so
	// that the official OpenAI and Anthropic SDKs, which sleep for whatever
	// Retry-After says, return the error at once (Retry-After still gives
	// the true wait). Default 60s.
	MaxRetryWait Duration `yaml:"max_retry_wait"`
	// UnmeteredPaths are path globs (path.Match syntax, matched against the
	// request's lowercase path with the upstream's prefix removed, e.g.
	// "/v1/images/*") of endpoints that spend tokens or money upstream but
	// that llmguard does not weigh, which callers under token or dollar
	// limits may call anyway: each counts as one request, and its ledger
	// record is marked unmetered. Default none: such calls are refused with
	// 403 unmetered_endpoint.
	UnmeteredPaths []string `yaml:"unmetered_paths"`
	// MaxResponseBytes caps a non-streamed upstream answer held whole to
	// read its usage; a larger one is streamed through unread, read as it
	// passes (uncompressed) or keeping its reservation (compressed), under an
	// error status too unless it is an error body (proxy.passingCount).
	// Default 64 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// MaxInflightResponseBytes caps the bytes of non-streamed upstream
	// answers held in memory by all requests at once (each held from its
	// first byte until it has been written to the client), their decoded
	// copies included; an answer that finds no room is streamed through
	// unread and keeps its reservation, as one over MaxResponseBytes does.
	// At least 64 KiB. Default 256 MiB. Changes at restart only.
	MaxInflightResponseBytes int64 `yaml:"max_inflight_response_bytes"`
	// MaxConnections caps the caller connections the proxy listener holds
	// open at once, idle keep-alive ones included; a connection past it is
	// answered 503 and closed at once. Each holds a file descriptor, and
	// one with a request in flight a second, to its upstream: 0 (the
	// default) is half the process's file-descriptor limit (RLIMIT_NOFILE,
	// which Go raises to the hard limit at start-up), at most 65,536 (each
	// holds a 16 KiB read buffer while it sends), so that connections
	// sending half a request cannot use up the descriptors the upstream
	// dials, Redis and the ledger need. A value set must be between
	// MaxConnectionsFloor (64) and MaxConnectionsCeiling (65,536):
	// Validate refuses another. Changes at restart only.
	MaxConnections int `yaml:"max_connections"`
	// DefaultMaxOutputTokens is the output reservation, in tokens, for a
	// request that sets no maximum and names a model absent from Models.
	// Default 4096.
	DefaultMaxOutputTokens int64 `yaml:"default_max_output_tokens"`
	// OutputReservation learns each model's output reservation from the
	// outputs it really produced, for requests that name no maximum
	// (README, "Learned output reservations"). Off unless Learn is set.
	OutputReservation OutputReservation `yaml:"output_reservation"`
	// DefaultMaxInputTokens is the input reserved, in tokens, by a request
	// with hidden context (previous_response_id, conversation, a stored
	// file, Azure data_sources) for a model without max_input_tokens.
	// Default 200000.
	DefaultMaxInputTokens int64 `yaml:"default_max_input_tokens"`
	// UsageCeilingWindow is the context window, in tokens, the usage
	// ceiling assumes for a model without max_input_tokens (a usage
	// above what a request can plausibly have used is charged at that
	// ceiling: weigher.Weigher.Ceiling). Default 10000000
	// (weigher.DefaultCeilingWindow).
	UsageCeilingWindow int64 `yaml:"usage_ceiling_window"`
	// ReportedCostCeilingUSD bounds, in USD, a cost the upstream reports
	// for one request (LiteLLM's x-litellm-response-cost header,
	// OpenRouter's usage.cost): it is charged at most the larger of this
	// and, for a weighed request, its usage ceiling at the table's price.
	// It alone bounds a request not weighed (an unmetered path, a free
	// endpoint, whose dollar rules are charged the reported cost) and an
	// image generation billed per image. Above the bound: charged at it,
	// logged and counted in usage_implausible_total{figure="cost"}.
	// Default 100 (weigher.DefaultCostCeilingMicroUSD); at most 1e12.
	ReportedCostCeilingUSD float64 `yaml:"reported_cost_ceiling_usd"`
	// CountCacheBytes bounds, in bytes, the memory of the cache of token
	// counts of request elements (chat messages, Responses input items,
	// Anthropic system prompts and messages, tool lists), keyed by a hash
	// of their exact bytes, so that a conversation resent with one more
	// turn has only that turn counted. Default 33554432 (32 MiB, about
	// 475,000 elements of 64 bytes each); at least
	// 65536; -1 turns the cache off (also by reload).
	CountCacheBytes int64 `yaml:"count_cache_bytes"`
	// MemoryLimitBytes is the Go runtime's soft memory limit, in bytes,
	// that llmguard serve sets (runtime/debug.SetMemoryLimit) at start and
	// at every reload, when GOMEMLIMIT is not set in the environment
	// (GOMEMLIMIT always wins). 0, the default: derived from the budgets
	// (app.MemoryLimit: max_inflight_body_bytes × 5/4 plus its kept
	// buffers, max_inflight_response_bytes, count_cache_bytes, the Go
	// memory in use at start, and 64 MiB), so that the collector lets the
	// heap grow to about that limit rather than to twice what is live.
	// -1: no limit (the Go default). Else at least 33554432 (32 MiB); a
	// value below app.MinUsefulMemoryLimit (the Go memory in use at start
	// plus 64 MiB) is applied with a warning, as the collector then runs
	// almost continuously. A whole number of bytes: no size suffixes.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
	// ExactCountMaxBytes is the most bytes of a request body's text counted
	// exactly: past them, a larger body's text is counted with the weigher's
	// fast upper bound (never below the exact count; 1.0–2.0× it, see
	// weigher/bound.go) and the response says x-llmguard-estimate: bound.
	// Reconciliation refunds the excess. Default 1 MiB (about 30 ms of
	// exact counting on one core); set it to max_body_bytes or more to
	// count every body exactly. weigher.Options.ExactMaxBytes.
	ExactCountMaxBytes int64 `yaml:"exact_count_max_bytes"`
	// CountTimeBudget is the longest a request's text is counted exactly
	// before the rest is counted with the upper bound, as for
	// ExactCountMaxBytes (checked every 4 KiB of text). Default 0: no time
	// budget. weigher.Options.CountTimeBudget.
	CountTimeBudget Duration `yaml:"count_time_budget"`
	// Identity chooses how callers are identified besides virtual keys.
	Identity Identity `yaml:"identity"`
	// Upstreams are the LLM APIs requests are forwarded to; at least one.
	Upstreams []Upstream `yaml:"upstreams"`
	// Keys are the virtual keys callers present.
	Keys []Key `yaml:"keys"`
	// KeyStore keeps more virtual keys in the Redis store, managed live
	// (README, "Managing keys"). Off by default.
	KeyStore KeyStore `yaml:"key_store"`
	// Models maps a model name to its encoding, prices and defaults. Its
	// prices take precedence over PricesFile's, which take precedence over
	// the embedded table (DefaultPricesJSON); a price left at zero is taken
	// from the layers below.
	Models map[string]Model `yaml:"models"`
	// PricesFile is an optional price list in the format of LiteLLM's
	// model_prices_and_context_window.json (USD per token), relative to the
	// config file's directory.
	PricesFile string `yaml:"prices_file"`
	// ImagePrices are the per-image prices, in USD, of image models billed
	// per image (DALL·E), keyed by ImagePriceKey(model, quality, "WxH"):
	// read from the embedded table and PricesFile (LiteLLM's
	// "[quality/]W-x-H/model" entries), not from YAML.
	ImagePrices map[string]float64 `yaml:"-"`
	// DefaultPrice prices every model that has no price of its own (no
	// priced entry, dated snapshot of one, or alias). Nil (the default):
	// such a model is not priced, and a usd limit refuses its requests
	// with 400 model_not_priced, since any guess could under-count. It
	// does not price a priority request for a priced model without
	// priority prices: set that model's priority prices.
	DefaultPrice *TierPrices `yaml:"default_price"`
	// priceKeys are the keys written in each models: entry that no lower
	// price layer (the embedded table, prices_file) knows and that is no
	// alias, and defaultPriceKeys those of default_price (nil: none): set
	// by parse, read by Validate (checkPriceSides) to refuse an entry that
	// prices one side of a model and leaves the other to cost nothing.
	priceKeys        map[string][]string
	defaultPriceKeys []string
	// writtenModels are the names of the models: entries the file writes,
	// sorted: their tiers are checked after the layers merge
	// (checkTierSides).
	writtenModels []string
	// DefaultServiceTier is the service tier of a request that names none
	// or names "auto": "default" (the standard tier; the default),
	// "priority" or "flex". Set "priority" when the OpenAI project's
	// default tier is Priority, so that admission reserves at priority
	// prices; settlement charges the tier the answer says it was served at
	// when that costs more (meter: servedAt), whatever this says.
	DefaultServiceTier string `yaml:"default_service_tier"`
	// Limits are the rules; every matching rule applies to a request.
	Limits []Limit `yaml:"limits"`
	// WaitQueue bounds the requests held by limits with on_limit: wait.
	WaitQueue WaitQueue `yaml:"wait_queue"`
	// Store selects where bucket state lives.
	Store Store `yaml:"store"`
	// Metrics bounds the label sets of /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Ledger is where one record per forwarded request goes.
	Ledger Ledger `yaml:"ledger"`
	// AccessLog is the per-request access log (off by default).
	AccessLog AccessLog `yaml:"access_log"`
	// Tracing is OpenTelemetry tracing (off by default).
	Tracing Tracing `yaml:"tracing"`
	// Alerts sends budget threshold alerts to a webhook (README, "Reports
	// for finance"). The zero value sends none.
	Alerts Alerts `yaml:"alerts"`
	// AdminTokenEnv names the environment variable holding the bearer token
	// that /admin/* endpoints require. Empty: /admin/* answers only
	// loopback clients.
	AdminTokenEnv string `yaml:"admin_token_env"`
	// TLS, when set, serves the proxy listener (listen) over TLS with
	// these files. Nil, the default: plain HTTP.
	TLS *TLS `yaml:"tls"`
	// AdminTLS, when set, serves the admin listener (admin_listen: health,
	// metrics, /admin/*) over TLS with these files. Nil: plain HTTP.
	AdminTLS *TLS `yaml:"admin_tls"`
	// Region names this node's region (1-32 lowercase letters, digits, -
	// or _), e.g. "eu": required when a limit has Regions, whose share for
	// this region the node enforces. Empty: the node is in no region.
	Region string `yaml:"region"`
	// RegionExchange, when set, moves unused share of the token-bucket
	// limits that have Regions between regions (see RegionExchange). Nil,
	// the default: every region holds its configured share.
	RegionExchange *RegionExchange `yaml:"region_exchange"`
}

// Ledger configures the usage ledger: an append-only JSON-lines file
// (rotated by size) and/or a Redis Stream. Both may be set; neither
// disables the ledger.
type Ledger struct {
	// File is the JSON-lines file, relative to the working directory.
	File string `yaml:"file"`
	// MaxSizeMB rotates the file past this size. Default 100.
	MaxSizeMB int `yaml:"max_size_mb"`
	// MaxBackups is how many rotated files to keep. Default 0: all.
	MaxBackups int `yaml:"max_backups"`
	// RedisStream is the Redis Stream key (XADD with MAXLEN ~ MaxLen), on
	// RedisURL or else the store's Redis.
	RedisStream string `yaml:"redis_stream"`
	// RedisURL is the Redis for the stream. Default: store.redis_url.
	RedisURL string `yaml:"redis_url"`
	// MaxLen bounds the stream (approximately). Default 1000000.
	MaxLen int64 `yaml:"maxlen"`
}

// Metrics bounds metric label sets: past the cap, new tenants and models are
// counted under "other".
type Metrics struct {
	// MaxTenants caps distinct tenant label values. Default 100.
	MaxTenants int `yaml:"max_tenants"`
	// MaxModels caps distinct model label values. Default 100.
	MaxModels int `yaml:"max_models"`
}

// Identity configures how a request's caller is found.
type Identity struct {
	// PassThrough, when true, admits a request whose credential is not a
	// configured virtual key: the credential is taken to be the caller's own
	// upstream key, forwarded unchanged, and its SHA-256 identifies the caller
	// (key id and user). Default false: unknown keys get 401.
	PassThrough bool `yaml:"pass_through"`
	// Tenant and Plan are given to pass-through callers. Default tenant
	// "pass-through", plan "".
	Tenant string `yaml:"tenant"`
	Plan   string `yaml:"plan"`
}

// Upstream is one LLM API llmguard forwards to.
type Upstream struct {
	// Name identifies the upstream in logs and metrics.
	Name string `yaml:"name"`
	// Flavor is the API shape: "openai", "anthropic" or "azure" (Azure
	// OpenAI).
	Flavor string `yaml:"flavor"`
	// BaseURL is the scheme, host and optional path of the API, e.g.
	// https://api.openai.com. The request path is appended to it.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the upstream key that
	// replaces the caller's virtual key. llmguard refuses to start when it
	// is empty or names a variable that is unset or empty, unless NoKey is
	// set (or every caller brings its own key: identity.pass_through with
	// no keys).
	APIKeyEnv string `yaml:"api_key_env"`
	// NoKey marks an upstream that needs no key of llmguard's (a local
	// server, the bundled mock): no credential is sent to it for virtual
	// keys. Set it or APIKeyEnv, not both. Default false.
	NoKey bool `yaml:"no_key"`
	// PathPrefix routes requests whose path starts with it here, with the
	// prefix stripped. Empty: routed by flavor.
	PathPrefix string `yaml:"path_prefix"`
	// Timeout bounds one upstream exchange, headers and body. Default 10m.
	Timeout Duration `yaml:"timeout"`
	// MaxConns caps pooled connections to this upstream. Default 1024.
	MaxConns int `yaml:"max_conns"`
	// IdleTimeout closes a pooled connection idle this long, before the
	// upstream's own keep-alive timeout closes it under a request (5s is
	// common: nginx's default 75s, but Node's and many load balancers' 5s).
	// Default 4s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// Deployments maps an Azure OpenAI deployment name to the model it
	// serves (flavor azure only), e.g. {chat-prod: gpt-4o-mini}: requests to
	// the deployment are weighed, priced and limited as that model. A
	// deployment not listed is taken as a model of its own name.
	Deployments map[string]string `yaml:"deployments"`
	// ChatOutputField is the member a chat completions request that names
	// no output maximum gets one written in, when output_reservation.pin
	// or a cap_output limit writes one: "max_tokens" or
	// "max_completion_tokens". Empty (the default): max_completion_tokens
	// for OpenAI's API (host api.openai.com) and Azure OpenAI (flavor
	// azure, or a host under .openai.azure.com), whose reasoning models
	// refuse max_tokens; max_tokens for any other server, the name
	// OpenAI-compatible servers read (Ollama, llama.cpp and TabbyAPI read
	// no max_completion_tokens, and would write past the maximum written
	// there). A gateway that forwards bodies unchanged to OpenAI's
	// reasoning models needs max_completion_tokens.
	ChatOutputField string `yaml:"chat_output_field"`
}

// Key is one virtual key: the credential a caller presents, and who it is.
type Key struct {
	// KeySHA256 is the lowercase hex SHA-256 of the key. Preferred.
	KeySHA256 string `yaml:"key_sha256"`
	// Key is the key in clear text, for development only.
	Key string `yaml:"key"`
	// User, Tenant and Plan identify the principal; Tenant is required.
	User   string `yaml:"user"`
	Tenant string `yaml:"tenant"`
	Plan   string `yaml:"plan"`
}

// Model holds one model's tokenizer, prices and output default.
// Prices are USD per million tokens, the unit of OpenAI's and Anthropic's
// public price lists.
type Model struct {
	// Encoding is the tiktoken encoding, e.g. o200k_base or cl100k_base.
	// Empty: the family default for the model's name.
	Encoding string `yaml:"encoding"`
	// InputUSDPerMTok is the price of uncached input tokens.
	InputUSDPerMTok float64 `yaml:"input_usd_per_mtok"`
	// CachedInputUSDPerMTok is the price of cached input tokens. Zero:
	// the input price.
	CachedInputUSDPerMTok float64 `yaml:"cached_input_usd_per_mtok"`
	// CacheWriteUSDPerMTok is the price of input tokens written to the
	// prompt cache (Anthropic's 5-minute cache writes, 1.25× input on its
	// price list). Zero: the input price.
	CacheWriteUSDPerMTok float64 `yaml:"cache_write_usd_per_mtok"`
	// CacheWrite1hUSDPerMTok is the price of 1-hour cache writes (2× input
	// on Anthropic's price list). Zero: the cache-write price.
	CacheWrite1hUSDPerMTok float64 `yaml:"cache_write_1h_usd_per_mtok"`
	// OutputUSDPerMTok is the price of output (and reasoning) tokens.
	OutputUSDPerMTok float64 `yaml:"output_usd_per_mtok"`
	// AudioInputUSDPerMTok and AudioOutputUSDPerMTok price the audio tokens
	// of a chat request's input and output (gpt-4o-audio-preview: $40 and
	// $80 against $2.50 and $10 for text, its model page on
	// developers.openai.com). Zero: no audio price; a request that sends
	// or asks for audio is then refused under a usd limit
	// (model_not_priced), and audio tokens an answer reports cost at least
	// the text prices.
	AudioInputUSDPerMTok  float64 `yaml:"audio_input_usd_per_mtok"`
	AudioOutputUSDPerMTok float64 `yaml:"audio_output_usd_per_mtok"`
	// SafetyFactor multiplies the local token count of models without a
	// public tokenizer (Claude): 0 means the weigher's default per family
	// (1.2; 1.6 for Claude's newer tokenizer).
	SafetyFactor float64 `yaml:"safety_factor"`
	// DefaultMaxOutputTokens is the output reservation, in tokens, when a
	// request sets no maximum. Zero: Config.DefaultMaxOutputTokens.
	DefaultMaxOutputTokens int64 `yaml:"default_max_output_tokens"`
	// MaxInputTokens is the model's largest input, in tokens: what a request
	// whose input the body does not hold (previous_response_id,
	// conversation, a stored file) reserves. Zero: the price table's
	// max_input_tokens, else Config.DefaultMaxInputTokens.
	MaxInputTokens int64 `yaml:"max_input_tokens"`
	// MaxOutputTokens is the model's documented maximum output per
	// completion, in tokens (its provider's model page): a learned output
	// reservation (output_reservation) never exceeds it. Zero: unknown.
	MaxOutputTokens int64 `yaml:"max_output_tokens"`
	// AliasOf makes this name another name of a priced model: it is
	// priced as that model (all its tiers), and counted with its encoding,
	// safety factor and default output where this entry leaves them unset.
	// An alias sets no prices of its own, and its target is not an alias.
	// Use it for names the upstream serves that are not dated snapshots
	// (`my-deployment`, `openai/gpt-4o`, `gpt-4o-latest`): only an exact
	// name, a dated snapshot of a priced name (`-YYYY-MM-DD`, `-YYYYMMDD`,
	// or `-MMDD`) or an alias is priced.
	AliasOf string `yaml:"alias_of"`
	// Priority prices a request that asks for OpenAI's service_tier
	// "priority" (https://openai.com/api-priority-processing/). A model
	// without it is not priced for such a request: a usd limit refuses it.
	Priority *TierPrices `yaml:"priority"`
	// Flex prices a request that asks for service_tier "flex" (Batch API
	// rates, https://developers.openai.com/api/docs/guides/flex-processing).
	// A model without it is priced at its standard prices for such a
	// request (which costs no more).
	Flex *TierPrices `yaml:"flex"`
	// LongContext prices every token of a request whose input (cached and
	// cache writes included) exceeds LongContext.AboveInputTokens, as
	// Anthropic (above 200K) and OpenAI (above 272K) bill long prompts.
	LongContext *LongContext `yaml:"long_context"`
	// SearchRequestUSDPerK is the model's per-request search fee, USD per
	// 1,000 requests by search context size, reserved for a request that
	// incurs one (weigher.Estimate.SearchContext: Perplexity's Sonar
	// models, OpenAI's search models, web_search_options) and charged at
	// the size the usage reports, or the size reserved when it reports
	// none (Sonar $5, $8 and $12 for low, medium and high; Sonar Pro and
	// Sonar Reasoning Pro $6, $10 and $14, docs.perplexity.ai pricing;
	// gpt-4o-search-preview $30, $35 and $50). LiteLLM's
	// search_context_cost_per_query gives it in a prices_file. A size left
	// out is charged policy.DefaultSearchRequestPicoUSD's fee, the
	// dearest search model's ($30, $35, $50: gpt-4o-search-preview); a
	// size written as 0 here waives it (SearchFees.Waived).
	SearchRequestUSDPerK SearchFees `yaml:"search_request_usd_per_k"`
}

// SearchFees are per-request search fees by search context size, in USD
// per 1,000 requests (the unit of Perplexity's price list). Zero: unset.
type SearchFees struct {
	Low    float64 `yaml:"low"`
	Medium float64 `yaml:"medium"`
	High   float64 `yaml:"high"`
	// zero has bit n set when size n (0 low, 1 medium, 2 high) was
	// written as 0 in the config (Waived).
	zero uint8
}

// UnmarshalYAML reads the three fees, noting each written as 0: a model
// that runs no search (a self-hosted one a caller sends
// web_search_options) is charged no fee at that size, where a size left
// out is charged the default.
func (s *SearchFees) UnmarshalYAML(unmarshal func(any) error) error {
	var raw struct {
		Low    *float64 `yaml:"low"`
		Medium *float64 `yaml:"medium"`
		High   *float64 `yaml:"high"`
	}
	if err := unmarshal(&raw); err != nil {
		return err
	}
	*s = SearchFees{}
	for n, f := range [...]struct {
		v   *float64
		dst *float64
	}{{raw.Low, &s.Low}, {raw.Medium, &s.Medium}, {raw.High, &s.High}} {
		if f.v == nil {
			continue
		}
		*f.dst = *f.v
		if *f.v == 0 {
			s.zero |= 1 << n
		}
	}
	return nil
}

// Waived reports whether the fee at size n (0 low, 1 medium, 2 high) was
// written as 0 in the config: no fee is reserved or charged at that size,
// where a size left out is charged policy.DefaultSearchRequestPicoUSD's.
// A prices_file's 0 (LiteLLM's table leaves fees out that way) waives
// nothing.
func (s SearchFees) Waived(n int) bool { return n >= 0 && n < 3 && s.zero&(1<<n) != 0 }

// TierPrices are a model's prices in one service tier or context band, in
// USD per million tokens. A zero CachedInput or CacheWrite price means the
// input price; a zero CacheWrite1h price means the cache-write price.
type TierPrices struct {
	InputUSDPerMTok        float64 `yaml:"input_usd_per_mtok"`
	CachedInputUSDPerMTok  float64 `yaml:"cached_input_usd_per_mtok"`
	CacheWriteUSDPerMTok   float64 `yaml:"cache_write_usd_per_mtok"`
	CacheWrite1hUSDPerMTok float64 `yaml:"cache_write_1h_usd_per_mtok"`
	OutputUSDPerMTok       float64 `yaml:"output_usd_per_mtok"`
	// AudioInputUSDPerMTok and AudioOutputUSDPerMTok are the audio prices
	// (Model.AudioInputUSDPerMTok); in a priority or flex tier left at
	// zero they are the standard tier's.
	AudioInputUSDPerMTok  float64 `yaml:"audio_input_usd_per_mtok"`
	AudioOutputUSDPerMTok float64 `yaml:"audio_output_usd_per_mtok"`
}

// LongContext is a model's long-prompt band: the prices of every token of
// a request whose input exceeds AboveInputTokens.
type LongContext struct {
	// AboveInputTokens is the band's threshold, in input tokens; at least 1.
	AboveInputTokens int64 `yaml:"above_input_tokens"`
	// The standard tier's prices past the threshold.
	TierPrices `yaml:",inline"`
	// Priority is the priority tier's prices past the threshold. Nil: the
	// higher of the priority prices and the long-context prices, field by
	// field.
	Priority *TierPrices `yaml:"priority"`
}

// Priced reports whether m sets any standard-tier price: an entry that
// sets only an encoding, a safety factor or a default output is not a
// price, and neither is an alias (which takes its target's).
func (m Model) Priced() bool {
	return m.Standard().Priced()
}

// Standard is m's standard-tier prices.
func (m Model) Standard() TierPrices {
	return TierPrices{InputUSDPerMTok: m.InputUSDPerMTok, CachedInputUSDPerMTok: m.CachedInputUSDPerMTok,
		CacheWriteUSDPerMTok: m.CacheWriteUSDPerMTok, CacheWrite1hUSDPerMTok: m.CacheWrite1hUSDPerMTok, OutputUSDPerMTok: m.OutputUSDPerMTok,
		AudioInputUSDPerMTok: m.AudioInputUSDPerMTok, AudioOutputUSDPerMTok: m.AudioOutputUSDPerMTok}
}

// Priced reports whether any of t's text prices is above zero (audio
// prices alone are no price).
func (t TierPrices) Priced() bool {
	return t.InputUSDPerMTok > 0 || t.CachedInputUSDPerMTok > 0 || t.CacheWriteUSDPerMTok > 0 ||
		t.CacheWrite1hUSDPerMTok > 0 || t.OutputUSDPerMTok > 0
}

// Limit is one rule, applied to every request its matchers fit: either a
// token bucket of Rate units per Per holding up to Burst, or a calendar
// quota of Quota units per Period (set exactly one of Rate and Quota).
type Limit struct {
	// Name identifies the limit in headers, errors, metrics and store keys.
	Name string `yaml:"name"`
	// Scope is whose bucket it is: key, user, tenant or global.
	Scope string `yaml:"scope"`
	// Unit is what the limit counts: requests, tokens, input_tokens,
	// output_tokens or usd.
	Unit string `yaml:"unit"`
	// Rate is the refill, in units per Per (for usd: dollars).
	Rate float64 `yaml:"rate"`
	// Per is the refill period, a Go duration (1s, 1m, 1h, 24h).
	Per Duration `yaml:"per"`
	// Burst is the bucket capacity in units (for usd: dollars). Zero: Rate.
	// A window algorithm has no burst: leave it unset (or equal to Rate).
	Burst float64 `yaml:"burst"`
	// Algorithm is how a rate limit counts: token_bucket (the default: a
	// bucket of Burst refilled at Rate per Per), sliding_window (the
	// sliding-window counter: the units of the current window of Per plus
	// those of the previous one, weighted by the share of it still inside
	// the last Per) or fixed_window (at most Rate units per window of Per;
	// windows aligned on the Unix epoch on the store's clock). Windows
	// admit Rate units per window, in whole units; they do not combine
	// with shards, leases or regions (README, "Window algorithms").
	Algorithm string `yaml:"algorithm"`
	// Quota makes the limit a calendar quota: at most Quota units (for
	// usd: dollars) per Period, reset at the period's start.
	Quota float64 `yaml:"quota"`
	// Period is the quota's calendar period: day, week (ISO 8601: from
	// Monday) or month.
	Period string `yaml:"period"`
	// Timezone is the IANA zone whose midnight starts a period. Default UTC.
	Timezone string `yaml:"timezone"`
	// WarnAt are fractions of the quota (e.g. [0.8, 0.95]); once a request
	// crosses one, responses carry x-llmguard-budget-warning.
	WarnAt []float64 `yaml:"warn_at"`
	// OnFailure overrides store.on_failure for this limit: "open" or
	// "closed".
	OnFailure string `yaml:"on_failure"`
	// PerModel keeps one bucket per model for each subject of Scope (the
	// model as priced: a dated snapshot shares its model's bucket, and
	// every model without a price shares one bucket), instead of one
	// bucket shared by every model the rule's matchers fit. Default false.
	PerModel bool `yaml:"per_model"`
	// Regions splits a global limit between regions, each with its own
	// Redis: region name → share of the limit, each in (0, 1], summing to
	// at most 1 (e.g. {eu: 0.6, us: 0.4}). A node in region r (Config.Region,
	// which must be listed) enforces share_r of the capacity and refill
	// rate (a quota: of the quota) in its own store, under keys that name
	// the region. Nil: the limit is not split.
	Regions map[string]float64 `yaml:"regions"`
	// Shards splits each bucket of the limit into this many sub-buckets
	// (shards), each holding Burst/Shards (a quota: Quota/Shards) and
	// refilling at Rate/Shards (the remainders going one unit each to the
	// first shards, so that the shards add up to the limit exactly), each
	// under a key of its own Redis Cluster hash tag, so that a hot global
	// or tenant bucket is spread over the cluster's slots. A request takes
	// from one shard chosen at random and tries the others before it is
	// denied; one that costs more than a shard holds takes from several at
	// once, all or nothing. 0 or 1: one bucket (the default); at most
	// MaxShards, and at most the limit's burst (quota) and rate in units,
	// so that every shard holds and refills at least one unit. See the
	// README, "Sharded limits", for what it costs in under-admission.
	Shards Count `yaml:"shards"`
	// Max makes the limit an in-flight limit (unit: concurrent): at most
	// Max requests of each subject of Scope in flight at once, a whole
	// number in [1, 100000]. A request holds one slot from admission until
	// its response ends, fails or its client leaves.
	Max float64 `yaml:"max"`
	// SlotLease is how long an in-flight limit's slot counts at most: the
	// slot of a request whose node died before releasing it is reclaimed
	// then. It must be at least every upstream's timeout (which bounds a
	// response, streams included), so that a live request never outlasts
	// its slot. Default: the longest upstream timeout plus 30s; at most
	// 24h. Only with unit: concurrent.
	SlotLease Duration `yaml:"slot_lease"`
	// Shadow makes the limit a shadow limit: evaluated, taken from its own
	// buckets and reported (x-llmguard-shadow headers, metrics, logs) for
	// requests the other limits admit, but never denying one. A shadow
	// bucket that cannot pay reports "would deny" and takes nothing (no
	// debt). For rolling out a new limit safely. Default false.
	Shadow bool `yaml:"shadow"`
	// Lease lets each llmguard node take Lease.Size units of this limit's
	// shared bucket (Redis, Redis Cluster) in one call and admit from
	// memory until they are spent or Lease.TTL passes (README, "Leases").
	// Token buckets only. nil: no lease.
	Lease *Lease `yaml:"lease"`
	// CapOutput lets this limit lower a request's output maximum instead of
	// denying it: when what the limit has left cannot pay the request's
	// output reservation but pays its input plus CapOutputMin tokens of
	// output per completion, the request goes upstream with its maximum
	// (max_completion_tokens / max_tokens, max_output_tokens, Anthropic's
	// max_tokens) lowered to what fits, and the answer carries
	// x-llmguard-output-capped. Units tokens, output_tokens and usd only.
	// Default false.
	CapOutput bool `yaml:"cap_output"`
	// CapOutputMin is the least output maximum per completion, in tokens,
	// CapOutput lowers a request to. Zero: 256.
	CapOutputMin int64 `yaml:"cap_output_min"`
	// OnLimit is what a request this limit denies does: "fail" (the
	// default: 429 at once) or "wait": when the wait it needs is at most
	// MaxWait, llmguard holds the request and admits it when the buckets
	// can pay (README, "Waiting instead of failing").
	OnLimit string `yaml:"on_limit"`
	// MaxWait is the longest a request waits under on_limit: wait, a Go
	// duration from 1ms to MaxLimitWait. Default 2s when on_limit is wait;
	// must be unset otherwise.
	MaxWait Duration `yaml:"max_wait"`
	// Matchers: when a list is set, the request must match one of its
	// entries. Models and Paths entries are globs in path.Match syntax;
	// in a Models glob `*` and `?` also match `/` (`*` matches
	// `openai/gpt-4o`), in a Paths glob they stop at `/`.
	Plans   []string `yaml:"plans"`
	Tenants []string `yaml:"tenants"`
	Users   []string `yaml:"users"`
	Models  []string `yaml:"models"`
	Paths   []string `yaml:"paths"`
}

// Lease is a limit's lease: how much of its shared bucket a node may hold
// in memory, and for how long.
type Lease struct {
	// Size is the most a node takes at once, in the limit's units (for
	// usd: dollars, like rate and burst): above zero, at most the burst.
	Size float64 `yaml:"size"`
	// TTL is how long a lease may be spent before its unused units go back,
	// a Go duration from 10ms to 10s. Default 100ms.
	TTL Duration `yaml:"ttl"`
}

// Lease bounds, and the default TTL.
const (
	MinLeaseTTL     = 10 * time.Millisecond
	MaxLeaseTTL     = 10 * time.Second
	DefaultLeaseTTL = 100 * time.Millisecond
)

// Store selects the bucket store.
type Store struct {
	// Backend is "memory" (default, one process), "redis" (one Redis
	// shared by every node) or "redis_cluster".
	Backend string `yaml:"backend"`
	// RedisURL is the Redis address for the redis backend,
	// e.g. redis://127.0.0.1:6379/0 (rediss:// for TLS; user and password
	// may be given in the URL).
	RedisURL string `yaml:"redis_url"`
	// ClusterAddrs are seed nodes for the redis_cluster backend: host:port,
	// or redis://user:password@host:port (rediss:// for TLS) for a cluster
	// that needs credentials; see ClusterSeeds.
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// Timeout bounds one store call on the request path (a take). Default
	// 50ms (bucket.DefaultTimeout): measured by
	// BenchmarkTakeLatencyUnderLoad on a shared 2-core machine, a healthy
	// Redis answered a take within 8–25ms as the machine was, and at p99
	// 27–37ms, p99.9 74–124ms with CPU hogs beside it; 5ms failed 0.3–2% of
	// takes even at rest (README, "Store timeouts").
	Timeout Duration `yaml:"timeout"`
	// PoolSize is the number of pooled connections per Redis node; every
	// take holds one for one round trip. Default 256.
	PoolSize int `yaml:"pool_size"`
	// OnFailure is what a limit does while the store is unavailable, unless
	// the limit says otherwise: "open" (default: admit against a per-node
	// in-memory bucket of limit / Nodes) or "closed" (answer 503).
	OnFailure string `yaml:"on_failure"`
	// Nodes is the expected number of llmguard nodes sharing the store; a
	// fail-open limit's per-node fallback bucket holds limit / Nodes.
	// Default 1.
	Nodes int `yaml:"nodes"`
	// Breaker trips after repeated store failures so that no request waits
	// for a store that is down.
	Breaker Breaker `yaml:"breaker"`
	// ReplayQueue bounds the reconciliations kept while the store is
	// unavailable, replayed when it returns; past it they are dropped and
	// counted. It bounds as well the fallback's spend held to be charged
	// to the store (one bucket in one period each: bucket.ChargeBack).
	// Default 100000.
	ReplayQueue int `yaml:"replay_queue"`
	// VoidWindow is how long the store remembers a take's request id so
	// that a take that failed on llmguard's side (timed out) but was applied
	// by the store can be voided (its reservation given back, once), and how
	// long a void's tombstone stops a take that reaches the store later.
	// In Redis each take costs one small marker key per slot group for that
	// long. Default 10s (bucket.DefaultVoidWindow).
	VoidWindow Duration `yaml:"void_window"`
	// DenyCache is the longest a node answers from memory, without asking
	// the store, the requests of a key that a Redis store has just denied
	// with a wait w: for min(w, DenyCache), requests that cost at least as
	// much as the denied one are denied at once, with the rest of w as
	// Retry-After (bucket.DenyCache). Denials only, never admissions: it
	// can only under-admit, by what refunds and reconciliations return to
	// the bucket within that time. Default 100ms: a cached denial never
	// outlives the wait the store gave, so a client that waits as told
	// never meets one, and 100ms holds back a refund for a tenth of a
	// second at most, under the one-second resolution of Retry-After (see
	// the README, "Cached denials"). 0 turns it off; at most 10s. Used by
	// the redis and redis_cluster backends only: the memory store's take
	// costs no more than the cache's lookup.
	DenyCache *Duration `yaml:"deny_cache"`
	// HealthCheck is how long a Redis store may go without a call before
	// the node sends one itself (a probe: a cost-0 take of a key no rule
	// uses, which writes nothing), so that a node without traffic notices
	// an outage and its /readyz, breaker gauge and store metrics say so;
	// while the store is failing the node probes every half
	// Breaker.OpenFor anyway. Default 5s (DefaultHealthCheck); 0 turns the
	// idle probe off. Used by the redis and redis_cluster backends only.
	HealthCheck *Duration `yaml:"health_check"`
}

// Kind is the store's Backend as package spec names it; BackendMemory for
// a name spec does not know (Validate refuses one) or for "" before
// Defaults fills it.
func (s Store) Kind() spec.Backend {
	b, _ := spec.ParseBackend(s.Backend)
	return b
}

// DefaultHealthCheck is store.health_check when the config leaves it
// unset: 5s, at most 12 probe takes a minute from an idle node (a busy
// node sends none: its requests' calls count).
const DefaultHealthCheck = Duration(5 * time.Second)

// Breaker configures the store's circuit breaker. It opens when at least
// FailureRatio of the store calls that ended in the last Window failed (once
// MinCalls calls ended), or at once when MinCalls calls in a row failed
// (with no success between them, however far apart: a quiet node opens it
// too).
type Breaker struct {
	// MinCalls is the number of calls in the window before the ratio
	// counts, and the number of failures in a row (no success between
	// them, in or out of the window) that open the breaker at once (a
	// store that is down). Default 20.
	MinCalls uint32 `yaml:"min_calls"`
	// FailureRatio is the share of failed calls in the window that opens
	// the breaker, in (0, 1]. Default 0.5.
	FailureRatio float64 `yaml:"failure_ratio"`
	// Window is how long calls are counted (a rolling window). Default 10s.
	Window Duration `yaml:"window"`
	// OpenFor is how long the breaker stays open before it lets one probe
	// through (half-open). Default 2s.
	OpenFor Duration `yaml:"open_for"`
}

// DefaultDenyCache is store.deny_cache when the config leaves it unset:
// 100ms (see Store.DenyCache).
const DefaultDenyCache = Duration(100 * time.Millisecond)

// MaxDenyCache is the longest store.deny_cache: 10s. A longer one would
// only hold denials past refunds for longer.
const MaxDenyCache = Duration(10 * time.Second)

// Count is a whole number (limits[].shards). It decodes as any whole-number
// field does: a number written whole ("8", "8.0", "1e1") is read, and one
// with a fraction ("2.5"), which the YAML decoder would round down, or any
// other text is reported by the parse with its line and value
// (fractionsInWholeFields, explainNumbers), as for every other whole-number
// field. (It used to decode itself, read only decimal digits, and left a
// marker that validation reported without line or value.)
type Count int

// Duration is a time.Duration written in YAML as a Go duration string
// ("250ms", "1m", "24h").
type Duration time.Duration

// invalidDuration marks a duration that did not parse, so that Validate can
// report it with its field path alongside every other problem.
const invalidDuration = Duration(math.MinInt64)

// UnmarshalText parses a Go duration string. A string that is not one
// leaves the invalid marker that Validate reports.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		*d = invalidDuration
		return nil
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML reads the duration from its YAML scalar (YAML decoders
// prefer this form to UnmarshalText; github.com/goccy/go-yaml, used before,
// fed UnmarshalText by re-formatting the node with a formatter built over
// every token of the whole file, so that a config with a thousand limits
// took time quadratic in its size). A value that is not a scalar, or not a
// Go duration, leaves the invalid marker that Validate reports with its
// field path.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		*d = invalidDuration
		return nil
	}
	return d.UnmarshalText([]byte(s))
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Load reads, parses and validates the YAML file at path.
// Errors: the file cannot be read; *Error listing every invalid field, or
// saying the file is empty (emptyFileProblem).
func Load(path string) (*Config, error) {
	b, err := ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return LoadBytes(b, path)
}

// LoadBytes is Load of b, the content already read of the file at path
// (files it names, such as a price list, are found beside it): a reload
// that has compared what it read applies exactly that. Errors: *Error, as
// Load's.
func LoadBytes(b []byte, path string) (*Config, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		// An editor that truncates before it writes, or a write caught
		// half-way, makes the watcher reload an empty file: "upstreams:
		// at least one upstream is required" sent its reader looking for
		// the upstreams the file does have (trial2).
		return nil, &Error{Problems: []string{emptyFileProblem}}
	}
	return parse(b, filepath.Dir(path))
}

// emptyFileProblem is Load's problem for a file that holds nothing but
// white space.
const emptyFileProblem = "the file is empty"

// Parse parses and validates one YAML document, fills defaults and returns
// the config. Unknown fields are errors. Errors: *Error.
func Parse(b []byte) (*Config, error) { return parse(b, "") }

func parse(b []byte, dir string) (*Config, error) {
	var c Config
	var decodeProblems []string
	var numbers []numberProblem // number fields written as something else
	var root *yaml.Node         // the document, for the lines of validation's problems; nil when it does not parse
	if len(bytes.TrimSpace(b)) > 0 {
		if err := scanYAML(b, configYAMLLimits); err != nil {
			return nil, &Error{Problems: []string{err.Error()}}
		}
		// One strict pass: go.yaml.in/yaml/v3 reports every unknown field
		// and every value of the wrong type (with its line) and goes on
		// decoding the rest, so that they and every invalid value are
		// reported together. Its cost is linear in the file's size.
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return nil, &Error{Problems: []string{syntaxProblem(strings.TrimPrefix(err.Error(), "yaml: "), b)}}
			}
			var explained map[int]string
			numbers, explained = explainNumbers(te.Errors, b, &c)
			var doc yaml.Node
			_ = yaml.Unmarshal(b, &doc) // it decoded above: a type error is not a syntax error
			for i, e := range te.Errors {
				if m, ok := explained[i]; ok {
					decodeProblems = append(decodeProblems, m)
					continue
				}
				if m, path, ok := explainShape(e, &doc); ok {
					// Validation judged the field as absent: its word on
					// it ("at least one upstream is required") is moot.
					numbers = append(numbers, numberProblem{path: path, message: m})
					decodeProblems = append(decodeProblems, m)
					continue
				}
				decodeProblems = append(decodeProblems, explainIntField(explainUnknownField(e), b))
			}
		}
		// The decoder rounds a fraction given to a whole-number field
		// down without a word: find them in the document itself.
		var doc yaml.Node
		if yaml.Unmarshal(b, &doc) == nil {
			root = &doc
			// A duration that does not parse keeps only a marker: name its
			// line and value here (validation's word on it is then moot).
			for _, p := range append(fractionsInWholeFields(root, reflect.TypeFor[Config]()), badDurations(root, reflect.TypeFor[Config]())...) {
				numbers = append(numbers, p)
				decodeProblems = append(decodeProblems, p.message)
			}
		}
	}
	c.notePriceKeys(b)
	c.applyDefaults()
	c.resolveTLS(dir)
	if err := c.loadPrices(dir); err != nil {
		return nil, err
	}
	err := c.Validate()
	if len(decodeProblems) > 0 {
		// A mapping with a key twice is left undecoded, so validation
		// would judge an empty mapping (a second top-level limits: read
		// as "upstreams: at least one upstream is required"): the
		// duplicate is then reported alone.
		var ce *Error
		if errors.As(err, &ce) && !slices.ContainsFunc(decodeProblems, duplicateKey) {
			for _, p := range ce.Problems {
				// A number field that could not be decoded was judged with
				// a stand-in value: what validation says of it is moot.
				if !slices.ContainsFunc(numbers, func(n numberProblem) bool { return concerns(p, n.path) }) {
					decodeProblems = append(decodeProblems, withLine(p, root))
				}
			}
		}
		byLine(decodeProblems)
		return nil, &Error{Problems: decodeProblems}
	}
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			for i, p := range ce.Problems {
				ce.Problems[i] = withLine(p, root)
			}
			byLine(ce.Problems)
		}
		return nil, err
	}
	return &c, nil
}

// duplicateKey reports whether problem, one of the strict pass's, is a key
// written twice in one mapping (go.yaml.in/yaml/v3: "line N: mapping key
// … already defined at line M"), after which the library decodes nothing
// of that mapping.
func duplicateKey(problem string) bool { return strings.Contains(problem, " already defined at line ") }

// notePriceKeys records which keys each models: entry and default_price
// write (Config.priceKeys, defaultPriceKeys), which the decoded numbers
// cannot tell: an absent price and an explicit 0 both read as zero. Its
// errors are the strict pass's, already reported.
func (c *Config) notePriceKeys(b []byte) {
	var written struct {
		Models       map[string]map[string]yaml.Node `yaml:"models"`
		DefaultPrice map[string]yaml.Node            `yaml:"default_price"`
	}
	_ = yaml.Unmarshal(b, &written)
	// A key whose value is null (`output_usd_per_mtok:` left empty, or
	// ~) writes no price: it reads as zero.
	keys := func(m map[string]yaml.Node) []string {
		var ks []string
		for k, v := range m {
			if v.Tag != "!!null" {
				ks = append(ks, k)
			}
		}
		return ks
	}
	c.priceKeys = make(map[string][]string, len(written.Models))
	for name, m := range written.Models {
		c.priceKeys[name] = keys(m)
		c.writtenModels = append(c.writtenModels, name)
	}
	slices.Sort(c.writtenModels)
	if written.DefaultPrice != nil {
		c.defaultPriceKeys = keys(written.DefaultPrice)
		if c.defaultPriceKeys == nil {
			c.defaultPriceKeys = []string{}
		}
	}
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.AdminListen == "" {
		c.AdminListen = "127.0.0.1:9090"
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = 64 << 20
	}
	if c.MaxJSONDepth == 0 {
		c.MaxJSONDepth = 128
	}
	if c.MaxInflightBodyBytes == 0 {
		c.MaxInflightBodyBytes = 256 << 20
	}
	if c.MaxInflightResponseBytes == 0 {
		c.MaxInflightResponseBytes = 256 << 20
	}
	if c.ClientWriteTimeout == 0 {
		c.ClientWriteTimeout = Duration(30 * time.Second)
	}
	if c.MaxRetryWait == 0 {
		c.MaxRetryWait = Duration(time.Minute)
	}
	c.applyWaitDefaults()
	c.applyAlertDefaults()
	if c.DefaultMaxInputTokens == 0 {
		c.DefaultMaxInputTokens = 200_000
	}
	if c.UsageCeilingWindow == 0 {
		c.UsageCeilingWindow = 10_000_000 // weigher.DefaultCeilingWindow
	}
	if c.ReportedCostCeilingUSD == 0 {
		c.ReportedCostCeilingUSD = 100 // weigher.DefaultCostCeilingMicroUSD
	}
	if c.DefaultMaxOutputTokens == 0 {
		c.DefaultMaxOutputTokens = 4096
	}
	if c.CountCacheBytes == 0 {
		c.CountCacheBytes = 32 << 20
	}
	if c.ExactCountMaxBytes == 0 {
		c.ExactCountMaxBytes = 1 << 20
	}
	if c.Identity.Tenant == "" {
		c.Identity.Tenant = "pass-through"
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Timeout == 0 {
			u.Timeout = Duration(10 * time.Minute)
		}
		if u.MaxConns == 0 {
			u.MaxConns = 1024
		}
		if u.IdleTimeout == 0 {
			u.IdleTimeout = Duration(4 * time.Second)
		}
	}
	for i := range c.Limits {
		l := &c.Limits[i]
		if l.Quota == 0 && l.Burst == 0 {
			l.Burst = l.Rate
		}
		if l.Shards == 0 {
			l.Shards = 1
		}
		if l.Quota != 0 && l.Timezone == "" {
			l.Timezone = "UTC"
		}
		if l.Lease != nil && l.Lease.TTL == 0 {
			l.Lease.TTL = Duration(DefaultLeaseTTL)
		}
		if l.Unit == spec.UnitConcurrent.String() && l.SlotLease == 0 {
			l.SlotLease = Duration(c.defaultSlotLease())
		}
	}
	if c.Store.Backend == "" {
		c.Store.Backend = spec.BackendMemory.String()
	}
	if c.Store.Timeout == 0 {
		c.Store.Timeout = Duration(50 * time.Millisecond)
	}
	if c.Store.VoidWindow == 0 {
		c.Store.VoidWindow = Duration(10 * time.Second)
	}
	if c.Store.DenyCache == nil {
		d := DefaultDenyCache
		c.Store.DenyCache = &d
	}
	if c.Store.HealthCheck == nil {
		d := DefaultHealthCheck
		c.Store.HealthCheck = &d
	}
	if c.Store.PoolSize == 0 {
		c.Store.PoolSize = 256
	}
	if c.Store.OnFailure == "" {
		c.Store.OnFailure = spec.FailOpen.String()
	}
	if c.Store.Nodes == 0 {
		c.Store.Nodes = 1
	}
	if c.Store.Breaker.MinCalls == 0 {
		c.Store.Breaker.MinCalls = 20
	}
	if c.Store.Breaker.FailureRatio == 0 {
		c.Store.Breaker.FailureRatio = 0.5
	}
	if c.Store.Breaker.Window == 0 {
		c.Store.Breaker.Window = Duration(10 * time.Second)
	}
	if c.Store.Breaker.OpenFor == 0 {
		c.Store.Breaker.OpenFor = Duration(2 * time.Second)
	}
	if c.Ledger.RedisStream != "" && c.Ledger.MaxLen == 0 {
		c.Ledger.MaxLen = 1000000
	}
	if c.Ledger.RedisStream != "" && c.Ledger.RedisURL == "" {
		c.Ledger.RedisURL = c.Store.RedisURL
	}
	c.applyRegionDefaults()
	c.applyObserveDefaults()
	c.applyKeyStoreDefaults()
	if c.Store.ReplayQueue == 0 {
		c.Store.ReplayQueue = 100000
	}
	for i := range c.Limits {
		if c.Limits[i].OnFailure == "" {
			c.Limits[i].OnFailure = c.Store.OnFailure
		}
	}
}

// OutputReservation configures learned output reservations: a request that
// names no output maximum reserves Quantile of the outputs its model
// produced recently (a decaying sketch per model) instead of
// default_max_output_tokens, clamped to [Floor, Cap] and to the model's
// max_output_tokens. Zero fields take the defaults of package reserve.
// Pin, learned or not, makes the reservation a hard bound. The section
// changes only at restart.
type OutputReservation struct {
	// Learn turns learning on. Default false: the fixed default.
	Learn bool `yaml:"learn"`
	// Pin forwards a chat, Responses, Messages or legacy completions
	// request that names no output maximum with its reservation per
	// completion (the fixed default or the learned one, after any
	// cap_output lowering; at least 16 for Responses) written as its
	// maximum, in the flavor's own field (max_completion_tokens,
	// max_output_tokens, max_tokens, max_tokens), so that the
	// upstream cannot bill more output than was reserved; the answer
	// carries x-llmguard-output-pinned. Completions get max_tokens per
	// completion (never lowered by cap_output), except with echo, whose
	// reservation is not a maximum per completion; a background Responses
	// run naming no maximum is forwarded pinned rather than refused. Not
	// for a request whose maximum does not bound its output (a prediction,
	// min_tokens, n_predict, a reasoning budget). Default false: such a
	// request is forwarded as sent, and an output past its reservation is
	// charged as debt.
	Pin bool `yaml:"pin"`
	// Quantile is the share of recent outputs covered, in (0, 1). Zero: 0.95.
	Quantile float64 `yaml:"quantile"`
	// MinSamples is how many settled outputs a model needs before its
	// reservation is learned. Zero: 50.
	MinSamples int64 `yaml:"min_samples"`
	// Floor and Cap bound a learned reservation per completion, in tokens.
	// Zero: 256 and 32768.
	Floor int64 `yaml:"floor"`
	Cap   int64 `yaml:"cap"`
	// HalfLife is after how many later outputs of a model an output
	// weighs half. Zero: 500.
	HalfLife int `yaml:"half_life"`
	// MaxModels bounds the per-model sketches (about 3 KiB each); unpriced
	// models always share one. Zero: 1024.
	MaxModels int `yaml:"max_models"`
}
