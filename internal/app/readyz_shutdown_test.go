package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// From the start of a shutdown (SIGTERM: App.Close) /readyz answers 503
// with status "shutting_down" while a stream in flight drains, then the
// stream ends whole. Before (trial2), /readyz answered 200 "ready" until
// the process exited, though the proxy listener was already closed: a load
// balancer probing it kept the node in rotation for the whole drain.
func TestReadyzSaysShuttingDownWhileDraining(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		<-release // held in flight until the test lets it end
		fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1,\"total_tokens\":9}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	var once bool
	t.Cleanup(func() {
		if !once {
			close(release)
		}
	})
	h := startWith(t, nil, srv.URL, "limits:\n  - {name: user-rpm, scope: user, unit: requests, rate: 10, per: 1m}\n")
	ready := func() (int, string) {
		t.Helper()
		resp, err := http.Get(h.admin + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("/readyz body: %v", err)
		}
		return resp.StatusCode, fmt.Sprint(body["status"])
	}
	if code, status := ready(); code != 200 || status != "ready" {
		t.Fatalf("/readyz before the shutdown: %d %q, want 200 ready", code, status)
	}
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line of the stream: %q, %v", line, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.app.Close() }()
	guard := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for code, status := ready(); code != 503; code, status = ready() {
		if code != 200 || status != "ready" {
			t.Fatalf("/readyz during the shutdown: %d %q", code, status)
		}
		if time.Now().After(guard) {
			t.Fatalf("/readyz still %d %q a minute into the shutdown, with a stream in flight", code, status)
		}
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) with the stream in flight", err)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, status := ready(); code != 503 || status != "shutting_down" {
		t.Fatalf("/readyz while draining: %d %q, want 503 shutting_down", code, status)
	}
	once = true
	close(release)
	rest, err := io.ReadAll(r)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the stream after the shutdown began: %q, %v", rest, err)
	}
	select {
	case <-closed:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("Close never returned after the stream ended")
	}
}
