package mockllm

import (
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"
)

// azureError answers status with Azure OpenAI's service error body,
// {"error":{"code":…,"message":…}}, the documented errorResponse schema
// with the fields the service fills for its own errors
// (https://learn.microsoft.com/azure/ai-foundry/openai/reference, section
// Components/errorResponse); code is the status as a string ("401", "404",
// "429"), as the service sends it. A 429 carries retry-after (seconds) and
// retry-after-ms, as the service documents for throttling
// (https://learn.microsoft.com/azure/ai-foundry/openai/how-to/provisioned-get-started#handle-high-utilization).
func azureError(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("apim-request-id", newID("apim-"))
	if status == fasthttp.StatusTooManyRequests {
		ctx.Response.Header.Set("retry-after", strconv.Itoa(azureRetryAfterMs/1000))
		ctx.Response.Header.Set("retry-after-ms", strconv.Itoa(azureRetryAfterMs))
	}
	ctx.SetBodyString(`{"error":{"code":` + js(strconv.Itoa(status)) + `,"message":` + js(msg) + `}}`)
}

// azureRetryAfterMs is the wait, in milliseconds, that the mock's Azure 429
// asks for.
const azureRetryAfterMs = 1000

// azureNotFound is the service's answer to an unknown path and to a dated
// API path without ?api-version= (a 404, not a 400: see
// https://github.com/MicrosoftDocs/azure-docs/issues/114602).
const azureNotFound = "Resource not found"

// withDeployment sets the body's "model" to the deployment named in the
// path when the body is a JSON object that names no model, so the answer's
// model and the token counts follow the deployment. A body that names a
// model, or is not a JSON object, is left as it is.
func withDeployment(req *fasthttp.Request, deployment string) {
	body := req.Body()
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() || gjson.GetBytes(body, "model").String() != "" {
		return
	}
	if b, err := sjson.SetBytes(body, "model", deployment); err == nil {
		req.SetBody(b)
	}
}

// azurePromptFilterChunk is the chunk an Azure OpenAI chat stream opens
// with: no choices, the prompt's content-filter results, empty id, model
// and object (see https://github.com/Azure/azure-sdk-for-go/issues/21086
// and https://github.com/pydantic/pydantic-ai/issues/797). withUsage adds
// "usage":null, as every chunk of a stream with include_usage carries.
func azurePromptFilterChunk(withUsage bool) string {
	u := ""
	if withUsage {
		u = `,"usage":null`
	}
	return `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]` + u + `}`
}
