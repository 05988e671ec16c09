package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An admin listener that cannot be reached is reported with the address
// asked and the flag that asks another (--admin): a node started with serve
// --admin-listen is not where its config's admin_listen says.
func TestUnreachableAdminNamesAddressAndFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	target := adminTarget{base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}}
	_, err = target.do("usage", http.MethodGet, "/admin/usage", nil, "", nil)
	if err == nil {
		t.Fatal("no error from a closed admin address")
	}
	for _, want := range []string{"usage: is llmguard running", addr, "--admin host:port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
