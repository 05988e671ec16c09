package mockllm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// GET /v1/models answers in the shape of the API its caller speaks:
// Anthropic's list ({"data":[{"type":"model","id","display_name",
// "created_at"}],"has_more","first_id","last_id"}) to a caller sending
// anthropic-version or x-api-key alone, whose key the mock then reads from
// x-api-key; OpenAI's list to the others. Both SDKs list it. Before, an
// Anthropic caller got OpenAI's list, and with a key required its
// x-api-key was refused (401).
func TestModelsListInTheCallersShape(t *testing.T) {
	s := startKeyed(t)
	get := func(hdr map[string]string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/models", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return resp.StatusCode, m
	}
	for _, tc := range []struct {
		name      string
		hdr       map[string]string
		anthropic bool
	}{
		{"anthropic-version and x-api-key", map[string]string{"anthropic-version": "2023-06-01", "x-api-key": azureKey}, true},
		{"x-api-key alone", map[string]string{"x-api-key": azureKey}, true},
		{"anthropic-version with a bearer key", map[string]string{"anthropic-version": "2023-06-01", "Authorization": "Bearer " + azureKey}, true},
		{"bearer key", map[string]string{"Authorization": "Bearer " + azureKey}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, m := get(tc.hdr)
			data, _ := m["data"].([]any)
			if code != 200 || len(data) != 1 {
				t.Fatalf("%d %v", code, m)
			}
			model, _ := data[0].(map[string]any)
			if tc.anthropic {
				if model["type"] != "model" || model["id"] != "claude-sonnet-4-5" || model["display_name"] == nil || m["has_more"] != false ||
					m["first_id"] != "claude-sonnet-4-5" || m["last_id"] != "claude-sonnet-4-5" || m["object"] != nil {
					t.Errorf("want Anthropic's list, got %v", m)
				}
				if _, err := time.Parse(time.RFC3339, model["created_at"].(string)); err != nil {
					t.Errorf("created_at %v: %v", model["created_at"], err)
				}
				return
			}
			if m["object"] != "list" || model["object"] != "model" || model["id"] != "gpt-4o-mini" || model["type"] != nil {
				t.Errorf("want OpenAI's list, got %v", m)
			}
		})
	}
	// Without its key an Anthropic caller gets Anthropic's 401.
	if code, m := get(map[string]string{"anthropic-version": "2023-06-01"}); code != 401 || m["type"] != "error" {
		t.Errorf("anthropic-version without a key: %d %v, want Anthropic's 401", code, m)
	}

	ctx := context.Background()
	ac := anthropic.NewClient(aoption.WithBaseURL(s.URL+"/"), aoption.WithAPIKey(azureKey), aoption.WithMaxRetries(0))
	page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "claude-sonnet-4-5" || page.Data[0].DisplayName == "" ||
		page.Data[0].CreatedAt.IsZero() || page.HasMore || page.FirstID != "claude-sonnet-4-5" {
		t.Errorf("anthropic-sdk-go Models.List: %v %+v", err, page)
	}
	oc := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(azureKey), option.WithMaxRetries(0))
	opage, err := oc.Models.List(ctx)
	if err != nil || len(opage.Data) != 1 || opage.Data[0].ID != "gpt-4o-mini" || opage.Data[0].Created == 0 {
		t.Errorf("openai-go Models.List: %v %+v", err, opage)
	}
}
