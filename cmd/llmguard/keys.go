package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/keystore"
)

// keysCmd manages the virtual keys of the key store through a running
// llmguard's admin API (README, "Managing keys"); `hash` works offline.
type keysCmd struct {
	Create keysCreateCmd `cmd:"" help:"Create a key; its secret is printed once, on stdout."`
	List   keysListCmd   `cmd:"" help:"List the stored keys."`
	Show   keysShowCmd   `cmd:"" help:"Show one stored key."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke a key: every node refuses it within a second."`
	Rotate keysRotateCmd `cmd:"" help:"Replace a key with a new one of the same user, tenant, plan and expiry; the new secret is printed once."`
	Audit  keysAuditCmd  `cmd:"" help:"Show the latest changes from the audit stream."`
	Hash   keysHashCmd   `cmd:"" help:"Print the SHA-256 of a key (the config file's key_sha256). Reads the key from stdin when not given."`
}

// adminFlags say which llmguard to ask and as whom.
type adminFlags struct {
	// Config has no embedded default, unlike serve's and usage's: the
	// default's store is in memory, and a key store needs Redis
	// (config: key_store.enabled), so there is no key store it could name.
	Config   string `help:"YAML config file of the llmguard to ask (its admin_listen and admin_token_env). Required unless --admin is given: the embedded default config (serve's and usage's without --config) has no key store." type:"path"`
	Admin    string `help:"Admin address (host:port, or https://host:port) to ask instead of the config's admin_listen."`
	AdminCA  string `name:"admin-ca" help:"PEM file of the CA that signed the admin listener's certificate (admin_tls), besides the system's roots and the config's admin_tls cert_file." type:"path"`
	TokenEnv string `name:"token-env" help:"Environment variable holding the admin token. Default: the config's admin_token_env."`
	// Actor is nil when --actor is not given; given, it must name someone
	// (trial12: --actor "$USER" with USER unset recorded admin-token).
	Actor *string `help:"Your name, recorded as the actor in the audit stream (default: how you authenticated)."`
	JSON  bool    `name:"json" help:"Print the endpoint's JSON as it is."`
}

// errNoKeyStoreTarget refuses a keys command given neither --config nor
// --admin (exit 2, as a missing flag): the embedded default config that
// serve and usage fall back to keeps its limits in memory, and a key store
// needs a Redis store, so it cannot hold the keys to manage.
var errNoKeyStoreTarget = usageError{errors.New("keys: pass --config FILE (the config of the llmguard whose key store to manage: store redis or redis_cluster, key_store: {enabled: true}) or --admin host:port; " +
	"unlike serve and usage, keys does not fall back to the embedded default config: its store is in memory, so it has no key store")}

// call sends one admin API request and returns the body of a 2xx answer;
// otherwise an error carrying the endpoint's message.
func (f *adminFlags) call(method, path string, body any) ([]byte, error) {
	tokenEnv := f.TokenEnv
	if f.Config == "" && f.Admin == "" {
		return nil, errNoKeyStoreTarget
	}
	// The node would refuse a bad actor as a bad X-Llmguard-Actor header,
	// naming a header the caller never wrote: name the flag instead.
	var actor string
	if f.Actor != nil {
		actor = *f.Actor
		if strings.TrimSpace(actor) == "" {
			return nil, usageError{errors.New(`keys: --actor is empty (an unset variable, as "$USER" where USER is not set?): give your name, recorded in the audit stream, or leave --actor out to be recorded as how you authenticated`)}
		}
	}
	if err := keystore.CheckText("--actor", actor); err != nil {
		return nil, usageError{fmt.Errorf("keys: %w (at most %d bytes of printable UTF-8: your name, recorded in the audit stream)", err, keystore.MaxFieldBytes)}
	}
	var cfg *config.Config
	if f.Config != "" {
		var err error
		if cfg, err = config.Load(f.Config); err != nil {
			printConfigError(os.Stderr, f.Config, err)
			os.Exit(1)
		}
		if tokenEnv == "" {
			tokenEnv = cfg.AdminTokenEnv
		}
	}
	target, err := newAdminTarget(cfg, f.Admin, f.AdminCA)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	var b []byte
	if body != nil {
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	var header map[string]string
	if actor != "" {
		header = map[string]string{app.ActorHeader: actor}
	}
	return target.do("keys", method, path, b, tokenEnv, header)
}

// printRaw writes an answer's JSON as it is.
func printRaw(b []byte) error {
	_, err := os.Stdout.Write(append(bytes.TrimRight(b, "\n"), '\n'))
	return err
}

type keysCreateCmd struct {
	adminFlags `embed:""`
	Tenant     string `help:"The key's tenant." required:""`
	User       string `help:"The key's user (default: the key id)."`
	Plan       string `help:"The key's plan."`
	ExpiresAt  string `name:"expires-at" help:"When the key stops working (RFC 3339, e.g. 2027-01-01T00:00:00Z)."`
	ExpiresIn  string `name:"expires-in" help:"How long the key works (a Go duration, e.g. 720h)."`
}

// Run creates the key and prints its secret alone on stdout (the details
// go to stderr), or the answer's JSON with --json.
func (c *keysCreateCmd) Run() error {
	b, err := c.call(http.MethodPost, "/admin/keys", map[string]string{"tenant": c.Tenant, "user": c.User, "plan": c.Plan,
		"expires_at": c.ExpiresAt, "expires_in": c.ExpiresIn})
	if err != nil {
		return err
	}
	return printNewKey(b, c.JSON, "created")
}

// printNewKey prints a create's or rotate's answer: the secret on stdout,
// what it is on stderr.
func printNewKey(b []byte, raw bool, verb string) error {
	if raw {
		return printRaw(b)
	}
	var k app.NewKey
	if err := json.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	fmt.Println(k.Secret)
	fmt.Fprintf(os.Stderr, "%s key %s for tenant %s, user %s%s, expires %s\n", verb, k.Key.ID, k.Key.Tenant, k.Key.User,
		planText(k.Key.Plan), expiryText(k.Key.ExpiresAt))
	if k.Previous != nil {
		fmt.Fprintf(os.Stderr, "previous key %s is %s\n", k.Previous.ID, stateText(*k.Previous))
	}
	fmt.Fprintln(os.Stderr, "the secret above is shown only now: llmguard keeps only its SHA-256")
	return nil
}

func planText(p string) string {
	if p == "" {
		return ""
	}
	return ", plan " + p
}

func expiryText(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}

// stateText is a key's state as keys show and rotate print it: the state,
// and for a key in its rotation's grace period which key replaced it and
// until when it works ("grace: rotated to 9f86d081884c7d65, works until
// 2026-12-07T21:00:00Z"), so that it reads apart from its successor.
func stateText(k app.KeyInfo) string {
	st := cmp.Or(k.State, k.Status) // an older node's answer has no state
	switch {
	case st == keystore.StateGrace:
		return st + ": rotated to " + k.RotatedTo + ", works until " + expiryText(k.ExpiresAt)
	case st == keystore.StatusActive && !k.ExpiresAt.IsZero():
		return st + " until " + k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return st
}

// rotationText is a key's rotation cell in keys list: "replaced by ID" for
// a rotated key, "replaces ID" for its successor, "" for neither.
func rotationText(k app.KeyInfo) string {
	var parts []string
	if k.RotatedFrom != "" {
		parts = append(parts, "replaces "+k.RotatedFrom)
	}
	if k.RotatedTo != "" {
		parts = append(parts, "replaced by "+k.RotatedTo)
	}
	return strings.Join(parts, ", ")
}

type keysListCmd struct {
	adminFlags `embed:""`
	Tenant     string `help:"Only this tenant."`
	User       string `help:"Only this user."`
	Status     string `help:"Only keys in this state: active (every key that works, those in a rotation's grace period included), grace (a rotated key that still works), expired or revoked." enum:",active,grace,expired,revoked" default:""`
}

// Run prints the keys as a table, or the JSON with --json.
func (c *keysListCmd) Run() error {
	q := url.Values{}
	for k, v := range map[string]string{"tenant": c.Tenant, "user": c.User, "status": c.Status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/admin/keys"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	b, err := c.call(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printRaw(b)
	}
	var l app.KeyList
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if l.Source != "store" {
		fmt.Fprintln(os.Stderr, "the store could not be read: this is the answering node's copy")
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "id\ttenant\tuser\tplan\tstate\tcreated\texpires\trotation")
	for _, k := range l.Keys {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.User, k.Plan, cmp.Or(k.State, k.Status),
			k.CreatedAt.UTC().Format(time.RFC3339), expiryText(k.ExpiresAt), rotationText(k))
	}
	return w.Flush()
}

type keysShowCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"The key id (16 hex digits)."`
}

// Run prints the key's fields, or the JSON with --json.
func (c *keysShowCmd) Run() error {
	b, err := c.call(http.MethodGet, "/admin/keys/"+url.PathEscape(c.ID), nil)
	if err != nil {
		return err
	}
	return printKey(b, c.JSON)
}

// printKey prints one KeyInfo as "field: value" lines.
func printKey(b []byte, raw bool) error {
	if raw {
		return printRaw(b)
	}
	var k app.KeyInfo
	if err := json.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s:\t%s\n", name, v)
		}
	}
	line("id", k.ID)
	line("sha256", k.SHA256)
	line("state", stateText(k))
	line("tenant", k.Tenant)
	line("user", k.User)
	line("plan", k.Plan)
	line("created", k.CreatedAt.UTC().Format(time.RFC3339)+" by "+k.CreatedBy)
	line("expires", expiryText(k.ExpiresAt))
	if !k.RevokedAt.IsZero() {
		line("revoked", k.RevokedAt.UTC().Format(time.RFC3339)+" by "+k.RevokedBy)
	}
	line("rotated from", k.RotatedFrom)
	line("rotated to", k.RotatedTo)
	for _, id := range k.GraceEnded {
		line("also revoked", id+" (its predecessor, in its grace period)")
	}
	return w.Flush()
}

type keysRevokeCmd struct {
	adminFlags `embed:""`
	ID         string `arg:"" help:"The key id (16 hex digits)."`
}

// Run revokes the key and prints it.
func (c *keysRevokeCmd) Run() error {
	b, err := c.call(http.MethodPost, "/admin/keys/"+url.PathEscape(c.ID)+"/revoke", nil)
	if err != nil {
		return err
	}
	return printKey(b, c.JSON)
}

type keysRotateCmd struct {
	adminFlags `embed:""`
	ID         string        `arg:"" help:"The key id (16 hex digits)."`
	Grace      time.Duration `help:"How long the old key keeps working (0: revoked at once)." default:"0s"`
}

// Run rotates the key and prints the new secret alone on stdout.
func (c *keysRotateCmd) Run() error {
	b, err := c.call(http.MethodPost, "/admin/keys/"+url.PathEscape(c.ID)+"/rotate", map[string]string{"grace": c.Grace.String()})
	if err != nil {
		return err
	}
	return printNewKey(b, c.JSON, "rotated: new")
}

type keysAuditCmd struct {
	adminFlags `embed:""`
	Count      int `help:"How many of the latest entries (1-1000)." default:"50"`
}

// Run prints the latest audit entries, newest first.
func (c *keysAuditCmd) Run() error {
	b, err := c.call(http.MethodGet, fmt.Sprintf("/admin/keys/audit?count=%d", c.Count), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printRaw(b)
	}
	var a struct{ Entries []keystore.AuditEntry }
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "at\tactor\taction\tkey\ttenant\tuser\tdetail")
	for _, e := range a.Entries {
		fmt.Fprintf(w, "%s\t%s (%s)\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), cell(e.Actor), cell(e.Auth), cell(e.Action), cell(e.KeyID), cell(e.Tenant), cell(e.User), cell(e.Detail))
	}
	return w.Flush()
}

type keysHashCmd struct {
	Key string `arg:"" optional:"" help:"The key. Omit it to read the key from stdin (it then stays out of your shell history)."`
}

// Run prints the lowercase hex SHA-256 of the key, the config file's
// key_sha256. The key is the argument, else the one line of stdin (the
// first 64 KiB read), with white space around it removed: the proxy trims
// it from the credential it reads (an Authorization, x-api-key or api-key
// value), so a key that kept a trailing space would hash to a value no
// request can match. Stdin holding a second line that is not blank is an
// error rather than a hash of its first line alone (trial9: a file of two
// keys printed one hash, and nothing said the second was left out).
func (c *keysHashCmd) Run() error {
	key := c.Key
	if key == "" {
		in := bufio.NewReader(io.LimitReader(os.Stdin, 64<<10))
		line, err := in.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		rest, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(rest)) > 0 {
			return errors.New("keys hash: stdin holds more than one line; give it one key (run keys hash once per key)")
		}
		key = line
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return errors.New("keys hash: no key given (as an argument or on stdin)")
	}
	fmt.Println(keystore.Hash(key))
	return nil
}
