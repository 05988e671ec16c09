package bucket

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/lua"
)

// script is one of the Redis store's scripts in its two forms: a function
// of the Redis Functions library lua.Library, called by FCALL, and the same
// text as an EVAL script, run by EVALSHA (EVAL on NOSCRIPT) where Redis has
// no Functions.
type script struct {
	fn   string        // the function's name in lua.Library
	eval *redis.Script // the EVAL form
}

// redisFunctions is what calling lua.Library needs of a client beyond
// RedisScripter: FCALL and FUNCTION LOAD. *redis.Client and
// *redis.ClusterClient have them; a client without them (a wrapper that
// only forwards scripts) is served by EVALSHA.
type redisFunctions interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	FunctionLoad(ctx context.Context, code string) *redis.StringCmd
}

// functions decides, for one store, whether its scripts run as the
// library's functions (FCALL) or by EVALSHA. It is safe for concurrent use.
type functions struct {
	client redisFunctions // nil: the client cannot call functions
	// off is set once a server answered FCALL or FUNCTION LOAD with
	// "unknown command" (Redis before 7.0, miniredis) or refused the
	// command to the client's ACL user: every later call runs by EVALSHA.
	off atomic.Bool
	// loads counts the library loads done by calls that missed it;
	// loading, a one-slot channel, serialises them, so that the calls a
	// restarted Redis fails all at once load the library once, not once
	// each (a load compiles some 50 KB of Lua inside Redis, blocking it
	// meanwhile). A channel rather than a mutex: a call waiting for
	// another's load gives up when its own context ends (lock).
	loads   atomic.Uint64
	loading chan struct{}
}

// lock takes the right to load the library, waiting while another call
// holds it, until ctx ends: false then (ctx's error is the caller's).
// unlock gives it back.
func (f *functions) lock(ctx context.Context) bool {
	select {
	case f.loading <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *functions) unlock() { <-f.loading }

// on reports whether the next call should be an FCALL.
func (f *functions) on() bool { return f.client != nil && !f.off.Load() }

// isUnknownCommand reports an error of a server that will not run FCALL or
// FUNCTION LOAD for this client: Redis before 7.0 (and miniredis) answers
// "ERR unknown command"; an ACL user allowed scripts but not functions gets
// "NOPERM this user has no permissions to run the 'fcall' command" (or
// 'function|load'), checked on Redis 7.0.15.
func isUnknownCommand(err error) bool {
	if redis.HasErrorPrefix(err, "unknown command") {
		return true
	}
	if !redis.HasErrorPrefix(err, "NOPERM") {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "'fcall'") || strings.Contains(msg, "'function")
}

// isFunctionMissing reports Redis 7's answer to an FCALL of a function it
// does not hold ("ERR Function not found"): a server restarted without
// persistence, a FUNCTION FLUSH, a node new to a cluster.
func isFunctionMissing(err error) bool { return redis.HasErrorPrefix(err, "Function not found") }

// loadLibrary loads lua.Library into Redis by FUNCTION LOAD: on every master
// of a *redis.ClusterClient (replicas get it by replication), else on the
// one server. A library of the same name already there is the same text (its
// name is its text's hash) and counts as loaded. It returns the first
// error; an "unknown command" error turns Functions off for the store.
func (r *Redis) loadLibrary(ctx context.Context) error {
	load := func(ctx context.Context, c redisFunctions) error {
		err := c.FunctionLoad(ctx, lua.Library).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	var err error
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(ctx, r.fns.client)
	}
	if err != nil && isUnknownCommand(err) {
		r.functionsOff(err)
	}
	return err
}

// functionsOff turns Functions off for the store, for good: every later
// call runs by EVALSHA. The first time, it logs why (err: the server's
// answer to FCALL or FUNCTION LOAD).
func (r *Redis) functionsOff(err error) {
	if r.fns.off.CompareAndSwap(false, true) {
		r.log.Warn("redis: running the scripts by EVALSHA from now on: the server has no FCALL or FUNCTION for this client (Redis before 7.0, or an ACL user refused them); a restart tries Functions again", "err", err)
	}
}

// call runs s once with keys and args: by FCALL while Functions are on,
// else by EVALSHA (EVAL on NOSCRIPT). An FCALL that finds the function
// missing loads the library and tries once more, then falls back to
// EVALSHA for this call; one that finds no FCALL command turns Functions
// off and runs by EVALSHA. Errors are in the Cmd.
func (r *Redis) call(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	if r.fns.on() {
		seen := r.fns.loads.Load()
		cmd := r.fns.client.FCall(ctx, s.fn, keys, args...)
		if !r.retryable(ctx, cmd.Err(), seen) {
			return cmd
		}
		if r.fns.on() {
			cmd = r.fns.client.FCall(ctx, s.fn, keys, args...)
			if err := cmd.Err(); !isFunctionMissing(err) && !isUnknownCommand(err) {
				return cmd
			}
		}
	}
	return s.eval.Run(ctx, r.client, keys, args...)
}

// retryable reports whether an FCALL that failed with err should be sent
// again: the function was missing (the library is loaded first, unless
// another call loaded it since seen, the count of loads done before this
// call was sent; when the load fails, the call should go by
// EVALSHA, and true is returned too) or the server has no FCALL (Functions
// are turned off). A missing function is not retried when ctx ends while
// the call waits for another call's load.
func (r *Redis) retryable(ctx context.Context, err error, seen uint64) bool {
	switch {
	case err == nil:
		return false
	case isUnknownCommand(err):
		r.functionsOff(err)
		return true
	case isFunctionMissing(err):
		if !r.fns.lock(ctx) {
			// The call's deadline passed while another call loaded the
			// library: its error stands (a store error, as any timeout).
			return false
		}
		defer r.fns.unlock()
		if r.fns.loads.Load() == seen {
			// A failure leaves the retry to fail, then EVALSHA.
			if lerr := r.loadLibrary(ctx); lerr != nil {
				r.log.Warn("redis: the functions library was missing (a restart without persistence, FUNCTION FLUSH or a new node) and loading it again failed: this call runs by EVALSHA", "library", lua.Version, "err", lerr)
			} else {
				r.log.Warn("redis: the functions library was missing (a restart without persistence, FUNCTION FLUSH or a new node): loaded it again", "library", lua.Version)
			}
			r.fns.loads.Add(1)
		}
		return true
	}
	return false
}

// pipelined adds s's call to pipe: an FCALL while Functions are on, else
// an EVALSHA. run repairs the calls that meet a missing function or script.
func (r *Redis) pipelined(ctx context.Context, pipe redis.Pipeliner, s *script, keys []string, args ...any) *redis.Cmd {
	if r.fns.on() {
		return pipe.FCall(ctx, s.fn, keys, args...)
	}
	return s.eval.EvalSha(ctx, pipe, keys, args...)
}

// needsRerun reports whether a pipelined call failed only for want of its
// function or script (NOSCRIPT, "Function not found", no FCALL command):
// run sends it again alone, by call.
func needsRerun(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "NOSCRIPT") || isFunctionMissing(err) || isUnknownCommand(err))
}
