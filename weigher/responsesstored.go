package weigher

import "github.com/tidwall/gjson"

// storedByID reports whether it, a Responses input item of type typ,
// hands back an earlier output item by its id alone, which the upstream
// loads from its store (store is the default) and bills as input though
// the body does not hold it, as it does an item_reference: a "reasoning"
// item with an "id" and no encrypted_content (the function-calling loop
// that appends response.output to the input:
// https://platform.openai.com/docs/guides/reasoning, "Keeping reasoning
// items in context"), and an "image_generation_call" with no "result"
// (multi-turn image editing by id:
// https://platform.openai.com/docs/guides/image-generation, "Multi-turn
// image generation"). The caller marks the estimate hidden context.
func storedByID(typ string, it gjson.Result) bool {
	switch typ {
	case "reasoning":
		return nonEmptyString(it.Get("id")) && !nonEmptyString(it.Get("encrypted_content"))
	case "image_generation_call":
		return !nonEmptyString(it.Get("result"))
	}
	return false
}

// nonEmptyString reports whether v is a JSON string other than "".
func nonEmptyString(v gjson.Result) bool { return v.Type == gjson.String && v.Str != "" }
