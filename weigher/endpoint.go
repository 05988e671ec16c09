package weigher

import (
	pathpkg "path"
	"strings"
)

// unmeteredFamilies are the API families (the first path segment after the
// API root) whose calls spend tokens or money upstream but that llmguard
// does not weigh (OpenAI API reference, https://platform.openai.com/docs/api-reference:
// batches, images, audio, realtime sessions, assistants and threads (runs
// bill the model), fine-tuning, files, uploads, vector stores (file search
// storage), containers, evals, videos; Anthropic's message batches are
// matched apart, below). A call to one is KindUnmetered.
var unmeteredFamilies = []string{
	"batches", "images", "audio", "realtime", "assistants", "threads", "fine_tuning", "fine-tunes",
	"files", "uploads", "vector_stores", "containers", "evals", "videos",
}

// unmeteredPaths are unmetered endpoints inside a weighed family, matched
// as path prefixes of the API-relative path.
var unmeteredPaths = []string{"/messages/batches"}

// freePaths are the POST endpoints, API-relative, that spend nothing
// upstream (OpenAI API reference: moderations are free, a stored chat
// completion's metadata update and a response's cancel bill nothing, and
// the input-token count is free; "*" is one path segment). Any other POST
// llmguard does not weigh is KindUnmetered.
var freePaths = []string{"/moderations", "/models", "/responses/input_tokens", "/responses/*/cancel", "/chat/completions/*"}

// weighedSuffixes are the weighed endpoints, API-relative (the kind table's
// paths without /v1), longest first so that /chat/completions is found
// before /completions and /messages/count_tokens before /messages. They
// match at the end of the path, after any prefix: /v1/chat/completions,
// /chat/completions, /openai/v1/chat/completions,
// /openai/deployments/d/chat/completions, /engines/m/chat/completions and
// /openai/deployments/d/extensions/chat/completions are all chat.
var weighedSuffixes = func() []kindPath {
	var ps []kindPath
	for _, kp := range kindPaths {
		ps = append(ps, kindPath{strings.TrimPrefix(kp.path, "/v1"), kp.kind})
	}
	for i := 1; i < len(ps); i++ { // insertion sort by length, longest first
		for j := i; j > 0 && len(ps[j].path) > len(ps[j-1].path); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	return ps
}()

// Classify names the endpoint of a request from its method and upstream
// path (decoded), erring towards weighing, so that no spelling of an
// endpoint an upstream might serve escapes its cost:
//   - GET, HEAD, DELETE and OPTIONS spend nothing: KindOther;
//   - case, repeated and trailing slashes, and anything after a '?' or '#'
//     are ignored;
//   - the API root is found whatever it is (/v1, /openai/v1, /openai,
//     /openai/deployments/{deployment}, or none), and a path in an
//     unmetered family is KindUnmetered;
//   - a path ending in a weighed endpoint, after any prefix, is that kind;
//   - a known free endpoint (freePaths) counts as a request only:
//     KindOther;
//   - anything else is KindUnmetered: an upstream may bill it (Ollama's
//     /api/chat, TGI's /generate, a rerank, another provider's API root),
//     and llmguard cannot weigh it.
//
// A ";params" part of a segment is dropped first, as servlet containers
// drop it before routing.
//
// Every other method (POST, PUT, PATCH, anything unknown) may carry a body
// and is classified by path. It allocates only for a path that needs
// lowering or cleaning.
func Classify(method, path string) Kind {
	if ReadMethod(method) {
		return KindOther
	}
	p := CanonicalPath(path)
	rest := apiRelative(p)
	family := rest
	if i := strings.IndexByte(rest[min(1, len(rest)):], '/'); i >= 0 {
		family = rest[:i+1]
	}
	if strings.HasSuffix(p, "/images/generations") {
		return KindImages // weighed for token-billed models; see TokenBilledImages
	}
	for _, f := range unmeteredFamilies {
		if family == "/"+f {
			return KindUnmetered
		}
	}
	for _, u := range unmeteredPaths {
		if rest == u || strings.HasPrefix(rest, u+"/") {
			return KindUnmetered
		}
	}
	for _, s := range weighedSuffixes {
		if strings.HasSuffix(p, s.path) {
			return s.kind
		}
	}
	for _, f := range freePaths {
		if ok, _ := pathpkg.Match(f, rest); ok {
			return KindOther
		}
	}
	return KindUnmetered
}

// offProxyFamily is the unmetered API family (one of unmeteredFamilies)
// whose calls start spending that llmguard never sees, not even as
// requests: the Realtime API's POSTs mint an ephemeral key
// (/v1/realtime/client_secrets; /v1/realtime/sessions and
// /v1/realtime/transcription_sessions before it) or answer a WebRTC offer
// (/v1/realtime/calls), and the session that follows runs between the
// caller and the provider directly, billed to the upstream's key (OpenAI
// API reference, Realtime: https://platform.openai.com/docs/api-reference/realtime).
// Azure OpenAI's preview spells the same calls /openai/realtimeapi/sessions
// and /v1/realtimertc (https://learn.microsoft.com/azure/ai-foundry/openai/how-to/realtime-audio-webrtc),
// so the family is matched as a segment's prefix (OffProxy).
const offProxyFamily = "realtime"

// OffProxy reports whether a call of method to path (upstream path,
// decoded, as Classify reads it) opens spending outside llmguard: a POST
// (or any method Classify reads by path) with a segment of its
// API-relative path (after /openai/deployments/{d}, which names the
// deployment, not the call) that starts with offProxyFamily,
// which hands the caller a credential or a session no limit of llmguard's
// can count afterwards. Any segment, not only the first after /v1, and any
// segment starting so ("realtimeapi", "realtimertc", and "realtime." or
// "realtime " that a lenient server trims), since an upstream with another
// API root (/api/v1/realtime/…) or another spelling serves the same key.
// Such a call is KindUnmetered, and unlike other unmetered calls it is
// refused to every caller, request-only ones included, unless
// unmetered_paths allows it. It allocates only for a path that needs
// lowering or cleaning.
func OffProxy(method, path string) bool {
	if ReadMethod(method) {
		return false
	}
	rest := apiRelative(CanonicalPath(path))
	for rest != "" {
		rest = rest[1:] // the '/' before the segment
		seg := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		if strings.HasPrefix(seg, offProxyFamily) {
			return true
		}
	}
	return false
}

// ReadMethod reports whether method (in any case, as a lenient server may
// read it) is GET, HEAD, DELETE or OPTIONS: a method Classify counts as one
// request whatever its path, since no API llmguard fronts bills one. Such
// a request must carry no body: an upstream that routes by path alone
// serves a GET with a chat body as a chat completion, and bills it.
func ReadMethod(method string) bool {
	for _, m := range [...]string{"GET", "HEAD", "DELETE", "OPTIONS"} {
		if strings.EqualFold(method, m) {
			return true
		}
	}
	return false
}

// CanonicalPath is path as Classify reads it: lowercase, anything after a
// '?' or '#' removed, each segment's ";params" removed, runs of '/'
// collapsed, no trailing '/' ("/" for the root).
func CanonicalPath(path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	clean := true
	for i := 0; i < len(path); i++ {
		c := path[i]
		if 'A' <= c && c <= 'Z' || c == ';' || c == '/' && i > 0 && path[i-1] == '/' {
			clean = false
			break
		}
	}
	if !clean {
		var b strings.Builder
		b.Grow(len(path))
		param := false
		for i := 0; i < len(path); i++ {
			c := path[i]
			switch {
			case c == '/':
				param = false
				if i > 0 && path[i-1] == '/' || b.Len() > 0 && b.String()[b.Len()-1] == '/' {
					continue
				}
			case c == ';':
				param = true
				continue
			case param:
				continue
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		path = b.String()
	}
	for len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	if path == "" {
		return "/"
	}
	return path
}

// apiRelative is a canonical path without its API root: /openai/deployments/{d},
// /openai/v1, /openai or /v1 (the first that applies); the path itself
// when it has none.
func apiRelative(p string) string {
	if rest, ok := strings.CutPrefix(p, "/openai/deployments/"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i:]
		}
		return "/"
	}
	for _, root := range []string{"/openai/v1", "/openai", "/v1"} {
		if rest, ok := strings.CutPrefix(p, root); ok && (rest == "" || rest[0] == '/') {
			if rest == "" {
				return "/"
			}
			return rest
		}
	}
	return p
}
