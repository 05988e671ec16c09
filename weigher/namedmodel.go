package weigher

import (
	"bytes"

	"github.com/llmguard/llmguard/internal/jsonscan"
	"github.com/tidwall/gjson"
)

// NamedModel is the model a request body names, for a request whose kind
// is not weighed (KindCountTokens, KindOther, KindUnmetered): its
// top-level "model" string, resolved as [Weigher.WeighResolved] resolves a
// weighed body's (resolve nil: the name as sent; resolve sees "" when the
// body names none, so an Azure deployment's path still names its model),
// copied (body is not kept). The body is read only when it passes the
// flat check a weighed body passes first (strict syntax in UTF-8, nesting
// within [Options.MaxDepth], no key named twice or in two cases) and is a
// JSON object; any other body (empty, multipart, compressed, an array)
// names no model, and neither does a "model" that is not a string. It
// weighs nothing: the name is for the ledger, so that a free
// count_tokens call is recorded under its model rather than under none.
// It never panics.
func (w *Weigher) NamedModel(body []byte, resolve func(bodyModel string) string) string {
	var model gjson.Result
	if len(body) > 0 && jsonscan.Check(body, jsonscan.Options{MaxDepth: w.maxDepth, FoldCase: true, UTF8: true}) == nil {
		if root := gjson.Parse(bodyString(bytes.TrimSpace(body))); root.IsObject() {
			model = root.Get("model")
		}
	}
	return modelNamed(model, resolve, w.names)
}
