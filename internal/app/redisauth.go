package app

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisAuthHint says what to do about err when it is a Redis refusing the
// connection's credentials, "" for any other error. The two replies are
// Redis's own (redis.io/docs/latest/commands/auth): NOAUTH when the server
// has a password (requirepass, or ACL users) and none was sent, WRONGPASS
// when the user or password sent is not accepted. go-redis sends what the
// redis:// URL holds (redis.ParseURL), so the hint names the URL's form.
// A command sent unauthenticated with an argument over 16 KiB (or over
// 10,240 arguments: FUNCTION LOAD of the scripts' library at start-up) is
// refused before its command is read, with "ERR Protocol error:
// unauthenticated bulk length" (or "multibulk length"; Redis 7's
// networking.c, checked on 7.0.15): the same refusal as NOAUTH, so the
// same hint.
// Before, validate --connect and serve's log gave the reply alone, and a
// platform team had to find out that the password belongs in the URL
// (trial20).
func redisAuthHint(err error) string {
	var re redis.Error
	if !errors.As(err, &re) {
		return ""
	}
	switch msg := re.Error(); {
	case strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "ERR Protocol error: unauthenticated"):
		return "this Redis requires a password and none was sent: put it in the URL as redis://:PASSWORD@host:port/0, " +
			"or redis://USER:PASSWORD@host:port/0 for an ACL user; a cluster takes such URLs in cluster_addrs"
	case strings.HasPrefix(msg, "WRONGPASS"):
		return "this Redis refused the URL's user or password: check them; with requirepass alone " +
			"the user is empty, redis://:PASSWORD@host:port/0"
	}
	return ""
}

// withAuthHint is err with redisAuthHint's advice appended when it has
// some, else err unchanged; the reply stays in the chain (errors.As still
// finds the redis.Error).
func withAuthHint(err error) error {
	if h := redisAuthHint(err); h != "" {
		return fmt.Errorf("%w — %s", err, h)
	}
	return err
}

// authHintAttrs is args with a "hint" attribute added when err is a Redis
// refusing the credentials: for the store's log lines.
func authHintAttrs(err error, args ...any) []any {
	if h := redisAuthHint(err); h != "" {
		args = append(args, "hint", h)
	}
	return args
}
