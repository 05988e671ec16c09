package mockllm

import "strings"

// flavor is the API dialect a path speaks: its error body and the header
// that carries the key.
type flavor uint8

const (
	// flavorOpenAI is /v1/… except Messages: {"error":{"message","type","param",
	// "code"}}, "Authorization: Bearer K".
	flavorOpenAI flavor = iota
	// flavorAnthropic is /v1/messages…: {"type":"error","error":{"type",
	// "message"}}, "x-api-key: K".
	flavorAnthropic
	// flavorAzure is /openai/…: {"error":{"code","message"}}, "api-key: K" (or
	// "Authorization: Bearer K").
	flavorAzure
)

// endpoint is the handler a path reaches; none for an unknown path.
type endpoint uint8

const (
	none endpoint = iota
	models
	chatCompletions
	responsesAPI
	textCompletions
	embeddingsAPI
	messagesAPI
	countTokensAPI
)

// v1Endpoints are the operations under /v1/ (OpenAI and Anthropic) by the
// rest of the path.
var v1Endpoints = map[string]endpoint{
	"models":                models,
	"chat/completions":      chatCompletions,
	"responses":             responsesAPI,
	"completions":           textCompletions,
	"embeddings":            embeddingsAPI,
	"messages":              messagesAPI,
	"messages/count_tokens": countTokensAPI,
}

// azureV1Endpoints are the operations of Azure OpenAI's v1 API under
// /openai/v1/, where the body names the deployment in "model" and
// api-version is optional
// (https://learn.microsoft.com/azure/foundry/openai/api-version-lifecycle).
var azureV1Endpoints = map[string]endpoint{
	"models":           models,
	"chat/completions": chatCompletions,
	"responses":        responsesAPI,
	"completions":      textCompletions,
	"embeddings":       embeddingsAPI,
}

// azureDeploymentEndpoints are the dated API's operations under
// /openai/deployments/{deployment-id}/, which need ?api-version=
// (https://learn.microsoft.com/azure/ai-foundry/openai/reference).
var azureDeploymentEndpoints = map[string]endpoint{
	"chat/completions": chatCompletions,
	"completions":      textCompletions,
	"embeddings":       embeddingsAPI,
}

// azureResourceEndpoints are the dated API's operations under /openai/
// that name no deployment in the path (the body's "model" does), which
// need ?api-version= too: POST /openai/responses, GET /openai/models — the
// paths the openai-go SDK's azure.WithEndpoint sends them to.
var azureResourceEndpoints = map[string]endpoint{
	"responses": responsesAPI,
	"models":    models,
}

// route is where a request path leads.
type route struct {
	flavor     flavor
	endpoint   endpoint // none: unknown path
	deployment string   // /openai/deployments/{deployment}/…, else ""
	// needsVersion is set for the dated Azure API, which answers 404
	// without ?api-version=.
	needsVersion bool
}

// routeOf maps a request path to its flavor and handler.
func routeOf(path string) route {
	if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
		fl := flavorOpenAI
		if rest == "messages" || strings.HasPrefix(rest, "messages/") {
			fl = flavorAnthropic
		}
		return route{flavor: fl, endpoint: v1Endpoints[rest]}
	}
	rest, ok := strings.CutPrefix(path, "/openai/")
	if !ok {
		return route{flavor: flavorOpenAI}
	}
	if op, ok := strings.CutPrefix(rest, "v1/"); ok {
		return route{flavor: flavorAzure, endpoint: azureV1Endpoints[op]}
	}
	if dep, ok := strings.CutPrefix(rest, "deployments/"); ok {
		name, op, _ := strings.Cut(dep, "/")
		r := route{flavor: flavorAzure, needsVersion: true}
		if name != "" {
			r.deployment, r.endpoint = name, azureDeploymentEndpoints[op]
		}
		return r
	}
	return route{flavor: flavorAzure, endpoint: azureResourceEndpoints[rest], needsVersion: true}
}
