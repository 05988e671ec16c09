// Package mockllm is a small upstream that speaks OpenAI's, Azure OpenAI's and
// Anthropic's HTTP APIs, for tests, benchmarks and the quickstart. It stands
// where the real provider would behind llmguard, so the proxy's weighing,
// streaming and usage reconciliation can be exercised end to end without the
// network.
//
// Endpoints (every answer carries usage unless x-mock-no-usage is set):
//
//	GET  /v1/models                  a one-model list: Anthropic's shape when the caller
//	                                 sends anthropic-version (or x-api-key and no
//	                                 Authorization), else OpenAI's
//	POST /v1/chat/completions        chat.completion JSON, or chunk SSE ending in [DONE]
//	POST /v1/responses               response JSON, or typed SSE events ending in response.completed
//	POST /v1/completions             text_completion JSON, or chunk SSE ending in [DONE]
//	POST /v1/embeddings              a list of 8-float embeddings (float or base64), one per input item
//	POST /v1/messages                Anthropic message JSON, or Anthropic SSE ending in message_stop
//	POST /v1/messages/count_tokens   {"input_tokens":N}
//
// Azure OpenAI's paths reach the same handlers
// (https://learn.microsoft.com/azure/ai-foundry/openai/reference and
// https://learn.microsoft.com/azure/foundry/openai/api-version-lifecycle):
//
//	POST /openai/deployments/{dep}/chat/completions?api-version=V
//	POST /openai/deployments/{dep}/completions?api-version=V
//	POST /openai/deployments/{dep}/embeddings?api-version=V
//	POST /openai/responses?api-version=V       (model in the body)
//	GET  /openai/models?api-version=V
//	POST /openai/v1/chat/completions           v1 API: model in the body,
//	POST /openai/v1/responses                  api-version optional
//	POST /openai/v1/completions
//	POST /openai/v1/embeddings
//	GET  /openai/v1/models
//
// These are the paths openai-go's azure.WithEndpoint sends to (it moves the
// body's model into /openai/deployments/{model}/ for chat, completions and
// embeddings) and, for the v1 API, option.WithBaseURL(endpoint+"/openai/v1/").
// A dated path without api-version, or an unknown /openai/ path, is answered
// 404 {"error":{"code":"404","message":"Resource not found"}}, as the service
// does. On a deployment path the deployment is the model when the body names
// none. Errors on /openai/ paths have Azure's shape,
// {"error":{"code":"<status>","message":…}} (with apim-request-id, and
// retry-after and retry-after-ms on a 429); a body that is not JSON gets
// OpenAI's 400, which fits Azure's documented error schema too. An Azure
// chat stream opens, as the service's does, with a chunk that has no
// choices, only prompt_filter_results.
//
// With [Options.APIKey] set the mock requires the key: "Authorization: Bearer
// K" anywhere, or the flavor's own header — "x-api-key" on /v1/messages…,
// "api-key" on /openai/… — else 401 in the flavor's error shape. [Start]
// requires none.
//
// The reply text is N words from a fixed list (" The quick brown fox …"),
// each a single token in o200k_base and cl100k_base; a stream sends one
// content delta per word. N is x-mock-completion-tokens when set, else
// min(the request's output limit, 16): max_completion_tokens / max_tokens
// (chat), max_output_tokens (Responses), max_tokens (completions, default
// 16; Messages). The mock does not enforce the limit against N or the
// reasoning tokens.
//
// A chat request's n (1..128; absent or below 1: 1) is the number of
// choices, each with N words (the output limit's share of one choice), and
// usage counts them all (n × N); other endpoints answer one reply.
//
// A request that forces a function tool gets a call of it in place of the
// text, its arguments {"input":"<the N words>"} (tools.go): chat
// tool_choice "required" (the first function in tools) or naming one
// ({"type":"function","function":{"name":…}}), a call in each choice with
// finish_reason "tool_calls" and content null; Responses "required" or
// {"type":"function","name":…}, a function_call output item; Messages
// {"type":"any"} (the first client tool) or {"type":"tool","name":…}, a
// tool_use block with stop_reason "tool_use". x-mock-tool-call asks for a
// call of the first function under "auto" (absent tool_choice), as a model
// that chose one; "none" never calls. Streamed, the call comes as each API
// streams one: its id and name once, then the arguments in pieces (the
// opening, one per word, the closing) as tool_calls deltas,
// response.function_call_arguments.delta events or input_json_delta
// blocks.
//
// A request for JSON output (chat response_format, Responses text.format,
// Messages output_config.format or output_format, of type json_object or
// json_schema) without a forced tool gets its N words as the object
// {"text":"<the N words>"} (jsonreply.go), streamed in the same pieces,
// so that an SDK's parse() decodes it; the schema is not followed.
//
// Input token counts come from the same weigher llmguard uses (unless
// [Options.ByteCountedChat] asks chat completions for len(body)/4, cheaply,
// for load benchmarks), so the mock reports what the provider would for
// plain text: chat prompt_tokens is the
// Chat estimate, Responses input_tokens the Responses estimate, completions
// and embeddings prompt_tokens the Completions and Embeddings estimates.
// Claude's tokenizer is not public, so a Messages request's whole input is
// the weigher's Messages estimate × 5/6 (the estimate without the default
// 1.2 safety factor, rounded down): below what the proxy reserves, as with
// the real API. Of that whole input, the cache fields take their share and
// input_tokens is the rest (Anthropic semantics: input_tokens excludes
// cache_creation_input_tokens and cache_read_input_tokens), never below 0.
// count_tokens answers the same whole input for the same body.
//
// Requests steer the mock with headers:
//
//	x-mock-status: N              answer N with the flavor's error body: OpenAI
//	                              {"error":{…}}; Anthropic (/v1/messages…)
//	                              {"type":"error","error":{"type":…,"message":…}};
//	                              Azure (/openai/…) {"error":{"code":"N","message":…}}
//	x-mock-completion-tokens: N   reply with exactly N output words/tokens
//	x-mock-tool-call: 1           call the first function tool under "auto" (see above)
//	x-mock-prompt-tokens: N       chat, Responses: report N input tokens (context
//	                              the upstream holds: previous_response_id, files)
//	x-mock-reasoning-tokens: R    Responses: R hidden reasoning tokens, added to
//	                              output_tokens and output_tokens_details.reasoning_tokens
//	                              (with a reasoning output item before the message)
//	x-mock-audio-input-tokens: A  chat: A more input tokens, reported as audio
//	                              (prompt_tokens_details.audio_tokens)
//	x-mock-audio-output-tokens: B chat: B more output tokens, reported as audio
//	                              (completion_tokens_details.audio_tokens)
//	x-mock-rejected-prediction-tokens: P  chat: P more output tokens, reported
//	                              as completion_tokens_details.rejected_prediction_tokens
//	x-mock-web-searches: K        Messages: server_tool_use.web_search_requests K
//	                              Responses: K web_search_call output items
//	x-mock-cache-read: R          Messages: cache_read_input_tokens R
//	x-mock-cache-write: C         Messages: cache_creation_input_tokens C
//	x-mock-cache-write-1h: H      Messages: H of the C written with the 1-hour TTL
//	                              (cache_creation.ephemeral_1h_input_tokens)
//	x-mock-split-delta: 1         Messages stream: two message_delta events, the
//	                              first with a partial cumulative output_tokens (N/2)
//	x-mock-no-usage: 1            omit usage: chat, completions and embeddings drop
//	                              the field (and the include_usage chunk), Responses
//	                              reports "usage":null, Messages drops its usage
//	                              objects — unrealistic for the last two, to test
//	                              the proxy's fallback to local counting
//	x-mock-delay-ms: N            wait N ms before each streamed content delta
//	x-mock-gzip: 1                gzip the answer whatever Accept-Encoding says
//	                              (Content-Encoding: gzip); a stream is gzipped
//	                              with a sync flush after every event
//	x-mock-sse-crlf: 1            end SSE lines with CRLF instead of LF
//	x-mock-stream-error: after=K  stream K content deltas (at most N), then the
//	                              flavor's in-band error, and end the body cleanly
//	                              without the final events: chat and completions
//	                              data: {"error":{"message":…,"type":"server_error",…}};
//	                              Responses event: response.failed with the failed
//	                              response object; Messages event: error with
//	                              {"type":"error","error":{"type":"overloaded_error",…}}
//	x-mock-error-usage: 1         Responses: response.failed carries usage (input,
//	                              and K + reasoning output tokens); else "usage":null
//	x-mock-stream-cut: K          stream K content deltas (at most N), then close the
//	                              connection without the final events, the chunked
//	                              terminator or the gzip trailer: the client sees an
//	                              unexpected EOF
//	x-mock-service-tier: T        chat, Responses: the answer says it was served at
//	                              tier T (service_tier: each chat chunk, a Responses
//	                              stream's final events; its earlier ones say "auto")
//	x-mock-litellm-cost: C        every answer carries x-litellm-response-cost: C
//	                              (C as sent: LiteLLM's proxy states its bill in
//	                              USD so, JSON answers and streams alike)
//
// K counts content deltas (one per word, per choice); "x-mock-stream-error: K" is read
// like "after=K". Streams are counted in [Server.StreamsCompleted] (the
// flavor's terminal event flushed), [Server.StreamsAborted] (a write failed:
// the client went away), [Server.StreamsErrored] (in-band error sent) and
// [Server.StreamsCut] (cut by x-mock-stream-cut).
package mockllm
