package proxy

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// Upstream is one API llmguard forwards to. The zero value is not usable;
// fill the exported fields and pass it in Options.
type Upstream struct {
	Name   string
	Flavor Flavor
	// BaseURL is scheme://host[:port][/path]; the request path is appended.
	BaseURL string
	// APIKey replaces the caller's credential upstream; empty sends none
	// (pass-through callers' own keys are always forwarded).
	APIKey string
	// PathPrefix routes requests starting with it here, prefix stripped.
	PathPrefix string
	// Timeout bounds one exchange, response body included.
	Timeout time.Duration
	// MaxConns caps pooled keep-alive connections.
	MaxConns int
	// IdleTimeout closes a pooled connection idle this long; keep it below
	// the upstream's own keep-alive timeout. Zero: 4s.
	IdleTimeout time.Duration
	// Deployments maps an Azure OpenAI deployment name to the model it
	// serves, which the request is weighed, priced and limited as; a
	// deployment it does not list is taken as a model of its own name.
	Deployments map[string]string
	// ChatOutputField is the member, "max_tokens" or
	// "max_completion_tokens", that a chat request naming no output
	// maximum gets one written in (output_reservation.pin, cap_output).
	// Empty: max_completion_tokens for OpenAI's own API and Azure OpenAI,
	// max_tokens for any other server (chatOutputFieldOf).
	ChatOutputField string

	dialect dialect // the Flavor's
	// chatOutputField is ChatOutputField or its default for this upstream.
	chatOutputField string
	// authField and authValue are the field that carries APIKey upstream,
	// as the dialect spells it (dialect.authorization), made once: unset
	// when APIKey is empty.
	authField, authValue string
	deployments          map[string]string // Deployments keyed by lowercase name

	client *fasthttp.HostClient
	// tlsConfig, when set, is the TLS configuration of an https upstream
	// (tests trust their own certificate with it); nil verifies the
	// server's name against the system's roots.
	tlsConfig *tls.Config
	scheme    string
	host      string
	basePath  string
	// series records the upstream's answers in the metrics (set by New;
	// nil records nothing).
	series *meter.UpstreamSeries
}

// modelOf is the model a request to deployment is weighed and priced as:
// the model Deployments maps it to, else the deployment's own name. Names
// are matched without regard to case, as Azure matches them, so that no
// spelling of a deployment escapes the rules of its model.
func (u *Upstream) modelOf(deployment string) string {
	if m, ok := u.deployments[strings.ToLower(deployment)]; ok {
		return m
	}
	return deployment
}

// mapsModel reports the model Deployments maps name to (case aside).
func (u *Upstream) mapsModel(name string) (string, bool) {
	m, ok := u.deployments[strings.ToLower(name)]
	return m, ok
}

func (u *Upstream) init() error {
	if u.dialect = dialectOf(u.Flavor); u.dialect == nil {
		return fmt.Errorf("proxy: upstream %q: flavor %v has no dialect", u.Name, u.Flavor)
	}
	if u.APIKey != "" {
		u.authField, u.authValue = u.dialect.authorization(u.APIKey)
	}
	u.deployments = make(map[string]string, len(u.Deployments))
	for d, m := range u.Deployments {
		if prev, dup := u.deployments[strings.ToLower(d)]; dup && prev != m {
			return fmt.Errorf("proxy: upstream %q: deployments %q map to different models but differ only in case", u.Name, d)
		}
		u.deployments[strings.ToLower(d)] = m
	}
	pu, err := url.Parse(u.BaseURL)
	if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
		return fmt.Errorf("proxy: upstream %q: bad base URL %q", u.Name, u.BaseURL)
	}
	addr := pu.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		if pu.Scheme == "https" {
			addr = net.JoinHostPort(pu.Hostname(), "443")
		} else {
			addr = net.JoinHostPort(pu.Hostname(), "80")
		}
	}
	u.scheme, u.host, u.basePath = pu.Scheme, pu.Host, strings.TrimSuffix(pu.Path, "/")
	if _, ok := spec.ParseChatOutputField(u.ChatOutputField); !ok && u.ChatOutputField != "" {
		return fmt.Errorf("proxy: upstream %q: chat output field %q is not one of %s", u.Name, u.ChatOutputField, strings.Join(spec.ChatOutputFieldNames(), ", "))
	}
	u.chatOutputField = chatOutputFieldOf(u, pu.Hostname())
	if u.IdleTimeout <= 0 {
		u.IdleTimeout = 4 * time.Second
	}
	useTLS := pu.Scheme == "https"
	tlsCfg := &tls.Config{}
	if u.tlsConfig != nil {
		tlsCfg = u.tlsConfig.Clone()
	}
	if tlsCfg.ServerName == "" {
		tlsCfg.ServerName = pu.Hostname()
	}
	if tlsCfg.ClientSessionCache == nil {
		// Resumed sessions make the fresh connections of retries cheap.
		tlsCfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	u.client = &fasthttp.HostClient{
		Addr:     addr,
		Name:     "llmguard",
		IsTLS:    useTLS,
		MaxConns: u.MaxConns,
		// Idle connections go before the upstream's keep-alive timeout
		// (commonly 5s) closes them; one it closed anyway is found before
		// a request is written on it, and the request retried on a fresh
		// connection (upstreamconn.go).
		MaxIdleConnDuration: u.IdleTimeout,
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			return dialUpstream(addr, timeout, useTLS, tlsCfg)
		},
		Transport:                     retryTransport{},
		RetryIfErr:                    retryOnce,
		MaxIdemponentCallAttempts:     2,
		ReadTimeout:                   u.Timeout,
		WriteTimeout:                  30 * time.Second,
		MaxConnWaitTimeout:            5 * time.Second,
		StreamResponseBody:            true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
		// An answer's header fields must fit in the read buffer: 4 KiB
		// (fasthttp's default) turned an answer with a CDN's cookies and
		// tracing fields into a 502 though the upstream had answered.
		ReadBufferSize: UpstreamReadBufferSize,
	}
	return nil
}

// UpstreamReadBufferSize is the read buffer, in bytes, of each upstream
// connection, which bounds an answer's status line and header fields
// together (16 KiB, as the proxy's own ReadBufferSize bounds a request's).
// A larger header is a 502 upstream_error that keeps the reservation.
const UpstreamReadBufferSize = 16 << 10

// router picks an upstream for a request path.
type router struct {
	byPrefix []*Upstream // longest prefix first
	// byFlavor is the first upstream of each flavor, prefixed or not: a
	// path a flavor owns goes there.
	byFlavor map[Flavor]*Upstream
	// fallback serves the paths no dialect owns: the first OpenAI
	// upstream, else the first upstream.
	fallback *Upstream
	// anthropic is byFlavor's Anthropic upstream (nil: none), which an
	// Anthropic SDK's call no dialect claims goes to (anthropicCall).
	anthropic *Upstream
	// known[i] is the route of knownPaths[i], worked out once (see
	// pathRoute); its up is nil for a path no upstream serves, which
	// Proxy.route then refuses by the long way.
	known []pathRoute
}

// pathRoute is what Proxy.route finds for one of knownPaths: route's
// upstream and upstream path, the upstream dialect's endpoint of that
// path (path, deployment) and the kind of a POST to it (classify's). For a
// known path each is a function of the path and of the router alone (its
// fields are not read: see route), so newRouter works them out once, and a
// request to a known path looks none of them up (perf30, issue #13: the
// dialects' claims, the endpoint and classify's map cost some 500
// instructions a request, callgrind).
type pathRoute struct {
	up               *Upstream // nil: no upstream serves the path
	upPath           string
	path, deployment string
	postKind         weigher.Kind
}

func newRouter(ups []*Upstream) *router {
	r := &router{byFlavor: make(map[Flavor]*Upstream)}
	for _, u := range ups {
		if u.PathPrefix != "" {
			r.byPrefix = append(r.byPrefix, u)
		}
		if r.byFlavor[u.Flavor] == nil {
			r.byFlavor[u.Flavor] = u
		}
	}
	r.anthropic = r.byFlavor[FlavorAnthropic]
	if r.fallback = r.byFlavor[FlavorOpenAI]; r.fallback == nil && len(ups) > 0 {
		r.fallback = ups[0]
	}
	sort.SliceStable(r.byPrefix, func(i, j int) bool { return len(r.byPrefix[i].PathPrefix) > len(r.byPrefix[j].PathPrefix) })
	r.known = make([]pathRoute, len(knownPaths))
	for i, p := range knownPaths {
		up, upPath := r.route(p, nil)       // a known path's fields are not read
		if up == nil || up.dialect == nil { // none serves it; or not set up (init): a test's router
			continue
		}
		path, deployment := up.dialect.endpoint(upPath)
		r.known[i] = pathRoute{up: up, upPath: upPath, path: path, deployment: deployment,
			postKind: classify([]byte(fasthttp.MethodPost), path)}
	}
	return r
}

// route returns the upstream for path and the path to send it, or nil.
// A prefix matches at a segment boundary: "/azure" matches "/azure/v1/…"
// but not "/azurex". Without a prefix, a path a flavor claims goes to that
// flavor's first upstream (Anthropic's /v1/messages: nil, a 404, when none
// is configured; Azure's /openai/: the fallback then). Any other path goes
// to the first Anthropic upstream when h carries Anthropic's version field
// and the path names no endpoint llmguard knows (anthropicCall), else to the
// fallback. h may be nil, read as no fields (Proxy.route passes nil for a
// known path, which no field moves); it is read only after the prefixes
// and claims, so that no field moves a path they place.
func (r *router) route(path string, h *fasthttp.RequestHeader) (*Upstream, string) {
	if u, rest := r.prefixed(path); u != nil {
		return u, rest
	}
	for f, d := range dialects {
		if d == nil {
			continue
		}
		switch c := d.claims(path); {
		case c == claimOnly, c == claimPrefer && r.byFlavor[Flavor(f)] != nil:
			return r.byFlavor[Flavor(f)], path
		}
	}
	if r.anthropic != nil && anthropicCall(path, h) {
		return r.anthropic, path
	}
	return r.fallback, path
}

// anthropicVersionField is the field every Anthropic SDK sends on every
// call, and Anthropic's API requires ("anthropic-version: 2023-06-01",
// https://docs.anthropic.com/en/api/versioning), in fasthttp's normalised
// spelling: PeekCanonical finds it without Peek's copy of the name. The
// OpenAI and Azure SDKs never send it.
var anthropicVersionField = []byte("Anthropic-Version")

// anthropicCall reports whether a request to path that no prefix or
// dialect claims is an Anthropic SDK's: h carries a non-empty
// anthropic-version field, and path names no endpoint of the weigher's
// kind table (weigher.Classify of a POST to it is KindOther or
// KindUnmetered: not chat, responses, completions, embeddings, images,
// messages or count_tokens, by any spelling or root). A weighed request
// keeps the upstream its path names whatever its fields: the upstream's
// dialect decides what is added to the body for the answer to report its
// usage (dialect.rewrite), so moving one would change how it is charged;
// and none of knownPaths moves, so Proxy.route need not read the fields
// for them. What the field moves (GET /v1/models, /v1/files, …) counts as
// one request or is unmetered, as it was on the fallback. h nil: false.
func anthropicCall(path string, h *fasthttp.RequestHeader) bool {
	if h == nil || len(bytes.TrimSpace(h.PeekCanonical(anthropicVersionField))) == 0 {
		return false
	}
	return weigher.Classify(fasthttp.MethodPost, path).Path() == ""
}

// prefixed returns the upstream whose path_prefix path falls under (the
// longest) and the path past the prefix ("/" when none is left), or nil.
func (r *router) prefixed(path string) (*Upstream, string) {
	for _, u := range r.byPrefix {
		p := strings.TrimSuffix(u.PathPrefix, "/")
		if strings.HasPrefix(path, p) && (len(path) == len(p) || path[len(p)] == '/') {
			if rest := path[len(p):]; rest != "" {
				return u, rest
			}
			return u, "/"
		}
	}
	return nil, ""
}

// owner names the flavor whose API claims path (Anthropic's for
// /v1/messages), configured or not, else Anthropic's for an Anthropic SDK's
// call (anthropicCall: h carries anthropic-version), else OpenAI: the shape
// of an answer about a path no upstream will get. h may be nil.
func (r *router) owner(path string, h *fasthttp.RequestHeader) Flavor {
	for f, d := range dialects {
		if d != nil && d.claims(path) != claimNone {
			return Flavor(f)
		}
	}
	if anthropicCall(path, h) {
		return FlavorAnthropic
	}
	return FlavorOpenAI
}

// hasPrefixFor reports whether path falls under an upstream's path_prefix.
func (r *router) hasPrefixFor(path string) bool {
	u, _ := r.prefixed(path)
	return u != nil
}

// unserved names the flavor that owns path when route found no upstream
// for it (Anthropic's /v1/messages in a config without an anthropic
// upstream), for the 404's shape and message.
func (r *router) unserved(path string) Flavor {
	for f, d := range dialects {
		if d != nil && d.claims(path) == claimOnly && r.byFlavor[Flavor(f)] == nil {
			return Flavor(f)
		}
	}
	return FlavorOpenAI
}

// hopHeaders are the hop-by-hop fields of RFC 9110 §7.6.1 (and the
// pre-standard Keep-Alive, Proxy-Connection), which a proxy must not
// forward in either direction.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// headerSet is what removeFields needs of fasthttp's RequestHeader and
// ResponseHeader.
type headerSet interface {
	PeekKeys() [][]byte
	PeekAll(string) [][]byte
	Del(string)
}

// removeFields deletes the hop-by-hop fields (hopHeaders), those the
// Connection field names, and the fields named in also, whatever the case
// they are written in: the upstream client keeps header names as sent, so
// "connection" and "Connection" are different keys to fasthttp but the same
// field to HTTP (RFC 9110 §5.1: field names are case-insensitive). It runs
// on every request and answer, so it walks the keys fasthttp keeps for
// PeekKeys once (no callback, no allocation) and deletes only the fields it
// finds there: fasthttp's Del normalises the name and walks the fields each
// time (about 35 ns; the request's hop-by-hop and credential fields made 20
// calls a request). PeekKeys lists every field fasthttp would write,
// including those it keeps outside its list (Connection: close from its
// flag, the Trailer announcement, cookies); for a hop-by-hop field found,
// its canonical name is deleted too, which clears the state fasthttp keeps
// beside the list (the Connection: close flag; announced trailers:
// deleting Trailer returns the fields it announced to the list, where a
// second walk finds them). It allocates only for a field it deletes whose name differs
// from the canonical spelling.
func removeFields(h headerSet, also *fieldSet) { removeFieldsOnce(h, also, true) }

// removeFieldsOnce is removeFields; walkAgain allows the second walk after
// a Trailer field is deleted (once: the second walk deletes what it finds).
func removeFieldsOnce(h headerSet, also *fieldSet, walkAgain bool) {
	var namedBuf [8]string
	named := namedBuf[:0] // the fields to delete, as written
	var connBuf [2]string
	conns := connBuf[:0] // the Connection fields, as written
	lens := hopFields.lens | also.lengths()
	_, request := h.(*fasthttp.RequestHeader) // routing fields go upstream only
	for _, k := range h.PeekKeys() {
		if request && (isRoutingField(k) || isGatewayRetryField(k)) {
			// One a chunked body's trailer brought, after checkPath
			// refused any in the headers: never forwarded.
			named = append(named, string(k))
			continue
		}
		if !request && ownField(k) {
			// An answer's x-llmguard-* field is llmguard's to write: one
			// from the upstream (another llmguard in front of the API, or
			// an upstream that sends such a name) would reach the caller
			// beside this node's, or, spelled in another case, in place
			// of one this node does not write on that answer.
			named = append(named, string(k))
			continue
		}
		if len(k) < 64 && lens&(1<<len(k)) == 0 {
			continue // no name of its length: most fields
		}
		if f := hopFields.match(k); f != "" {
			if f == "Trailer" && walkAgain {
				// The fields it announced come back to the list when it
				// goes: delete it, then walk the fields again.
				h.Del(spelled(k, f))
				h.Del(f)
				removeFieldsOnce(h, also, false)
				return
			}
			if f == "Connection" {
				conns = append(conns, spelled(k, f))
			}
			named = append(named, spelled(k, f))
			if string(k) != f {
				named = append(named, f)
			}
		} else if f := also.match(k); f != "" {
			named = append(named, spelled(k, f))
		}
	}
	if len(conns) > 0 {
		// The field names the Connection fields list, in lower case, each
		// once, and the fields of those names, each spelling once: a
		// caller's 16 KiB header can list thousands of names beside
		// thousands of fields, which compared pairwise (and deleted once
		// per field, each Del walking every field) took 130 ms of CPU
		// (TestConnectionListOfThousandsIsCheap).
		listed := map[string]struct{}{}
		for i, c := range conns {
			if slices.Contains(conns[:i], c) {
				continue
			}
			// Every field of the name, not the first only: the field
			// may be repeated (RFC 9110 §5.3, §7.6.1).
			for _, v := range h.PeekAll(c) {
				for f := range bytes.SplitSeq(v, []byte(",")) {
					if f = bytes.TrimSpace(f); len(f) > 0 {
						listed[string(asciiLower(nil, f))] = struct{}{}
					}
				}
			}
		}
		var lower [64]byte
		seen := map[string]struct{}{}
		for _, k := range h.PeekKeys() {
			_, in := listed[string(asciiLower(lower[:0], k))] // on the stack up to 64 bytes
			if _, dup := seen[string(k)]; in && !dup {
				seen[string(k)] = struct{}{}
				named = append(named, string(k))
			}
		}
	}
	for _, k := range named {
		h.Del(k)
	}
}

// asciiLower appends k in ASCII lower case to dst: a field name's folding
// (field names are tokens, ASCII: RFC 9110 §5.1; no Unicode folding, which
// would make the Kelvin sign a "k").
func asciiLower(dst, k []byte) []byte {
	for _, c := range k {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// hopFields is hopHeaders as a fieldSet.
var hopFields = newFieldSet(hopHeaders)

// ownPrefix is the start of the names of llmguard's own answer fields
// (x-llmguard-request-id, x-llmguard-estimate, …).
const ownPrefix = "x-llmguard-"

// ownField reports whether the field name k starts with ownPrefix, in any
// letter case.
func ownField(k []byte) bool {
	return len(k) > len(ownPrefix) && (k[0]|0x20) == 'x' && bytes.EqualFold(k[:len(ownPrefix)], []byte(ownPrefix))
}

// fieldSet is a list of field names arranged for matching a field name
// against it without regard to case: by length, so that a name is
// compared only with the names of its length, and those by their first
// and last bytes before bytes.EqualFold. removeFields matched every field
// of a request against the 19 names of hopHeaders and a drop list one by
// one (about 1,100 instructions a request). A nil *fieldSet holds no
// names. Read-only once made; safe for concurrent use.
type fieldSet struct {
	lens  uint64       // bit n: a name of n bytes (n < 64)
	byLen [64][]string // the names of each length below 64
	long  []string     // the names of 64 bytes or more
}

// newFieldSet returns the set of names.
func newFieldSet(names []string) *fieldSet {
	s := &fieldSet{}
	for _, n := range names {
		if len(n) < 64 {
			s.lens |= 1 << len(n)
			s.byLen[len(n)] = append(s.byLen[len(n)], n)
		} else {
			s.long = append(s.long, n)
		}
	}
	return s
}

// lengths is the set of the lengths of s's names below 64 bytes, as bits.
func (s *fieldSet) lengths() uint64 {
	if s == nil {
		return 0
	}
	return s.lens
}

// match returns the name in s that k spells, without regard to case; ""
// when none. An ASCII name that bytes.EqualFold finds equal to k is k's
// bytes with the case of letters changed (a non-ASCII rune that folds to
// an ASCII letter is longer than it, so k would be longer than the name),
// so comparing first and last bytes with their letter case cleared first
// rejects nothing EqualFold accepts.
func (s *fieldSet) match(k []byte) string {
	if s == nil || len(k) == 0 {
		return ""
	}
	names := s.long
	if len(k) < 64 {
		names = s.byLen[len(k)]
	}
	first, last := k[0]|0x20, k[len(k)-1]|0x20
	for _, n := range names {
		if len(n) == len(k) && n[0]|0x20 == first && n[len(n)-1]|0x20 == last && bytes.EqualFold([]byte(n), k) {
			return n
		}
	}
	return ""
}

// spelled is k, a field name that matched f, as a string: f itself when k
// spells it exactly (no allocation), a copy otherwise.
func spelled(k []byte, f string) string {
	if string(k) == f {
		return f
	}
	return string(k)
}
