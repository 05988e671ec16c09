// Package redisstats reads what Redis servers did over an interval, from
// their own accounting: INFO commandstats (calls and µs per command), INFO
// stats (reads processed: one per batch of commands a connection sent, so
// about one per round trip) and INFO cpu (the process's CPU time), summed
// over every server read (a cluster's masters), so that a benchmark can
// state the Redis commands and the Redis CPU that one request costs. It is
// measurement code: nothing on llmguard's request path uses it.
//
// Take a Reading before and after a load (or Reset before it) and divide
// the difference (Reading.Sub) by the requests served:
//
//	before, _ := redisstats.Read(ctx, node)
//	… the load …
//	after, _ := redisstats.Read(ctx, node)
//	per := after.Sub(before).Per(admitted)
package redisstats

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one Redis server to read: *redis.Client satisfies it.
type Node interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
	ConfigResetStat(ctx context.Context) *redis.StatusCmd
}

// Command is one command's line of INFO commandstats.
type Command struct {
	// Calls is how many times the command ran, including the times a
	// script ran it (redis.call).
	Calls int64
	// Usec is the time it took in all, µs of the server's main thread. A
	// script's time (EVAL, EVALSHA, FCALL…) includes that of the commands
	// it ran, which are also counted under their own names.
	Usec int64
}

// Reading is what one or more servers had done when read: their counters
// added up. The zero Reading is empty; a Reading is a plain value.
type Reading struct {
	// Commands holds INFO commandstats by the name Redis gives a command
	// ("evalsha", "get", "config|resetstat"), except the reader's own
	// (info, config|resetstat).
	Commands map[string]Command
	// ReadsProcessed is INFO stats' total_reads_processed: the reads of
	// client connections, one for each batch of commands a client sent (a
	// command, or a pipeline that arrived in one read): about one per round
	// trip.
	ReadsProcessed int64
	// CPU is INFO cpu's used_cpu_user + used_cpu_sys: the whole process's
	// CPU time, network I/O and every thread included, at µs resolution.
	CPU time.Duration
	// UserCPU is used_cpu_user alone: the process's CPU time outside the
	// kernel, where scripts and commands run (most of the network I/O is
	// system time). Unlike commandstats' µs, which are wall time, it does
	// not grow when a loaded machine pauses the process.
	UserCPU time.Duration
	// Nodes is how many servers were read.
	Nodes int
}

// scripts are the commands that run Lua scripts or functions: their time
// includes the commands they run.
var scripts = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true,
}

// own are the reader's own commands, left out of every Reading.
var own = map[string]bool{"info": true, "config|resetstat": true}

// Read reads every node (INFO commandstats, stats and cpu, one call each,
// concurrently) and adds them up. Errors: a node that fails to answer, or
// answers INFO in a form this package cannot read.
func Read(ctx context.Context, nodes ...Node) (Reading, error) {
	readings := make([]Reading, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, err := n.Info(ctx, "commandstats", "stats", "cpu").Result()
			if err != nil {
				errs[i] = fmt.Errorf("redisstats: info: %w", err)
				return
			}
			readings[i], errs[i] = Parse(text)
		}()
	}
	wg.Wait()
	sum := Reading{Commands: map[string]Command{}}
	for i := range nodes {
		if errs[i] != nil {
			return Reading{}, errs[i]
		}
		sum = sum.add(readings[i], 1)
	}
	sum.Nodes = len(nodes)
	return sum, nil
}

// ReadCluster reads every master of c, as Read. Errors: Read's, or the
// cluster's topology could not be loaded.
func ReadCluster(ctx context.Context, c *redis.ClusterClient) (Reading, error) {
	nodes, err := masters(ctx, c)
	if err != nil {
		return Reading{}, err
	}
	return Read(ctx, nodes...)
}

// Reset runs CONFIG RESETSTAT on every node: commandstats and
// total_reads_processed start again from zero (the CPU time does not).
// Errors: a node that refuses it.
func Reset(ctx context.Context, nodes ...Node) error {
	for _, n := range nodes {
		if err := n.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("redisstats: config resetstat: %w", err)
		}
	}
	return nil
}

// ResetCluster resets every master of c, as Reset.
func ResetCluster(ctx context.Context, c *redis.ClusterClient) error {
	nodes, err := masters(ctx, c)
	if err != nil {
		return err
	}
	return Reset(ctx, nodes...)
}

func masters(ctx context.Context, c *redis.ClusterClient) ([]Node, error) {
	var mu sync.Mutex
	var nodes []Node
	err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, m)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstats: cluster masters: %w", err)
	}
	return nodes, nil
}

// Parse reads the text of INFO (any sections; those this package does not
// use are skipped) into a Reading of one node. Errors: a commandstats,
// total_reads_processed or used_cpu line whose numbers do not parse.
func Parse(info string) (Reading, error) {
	r := Reading{Commands: map[string]Command{}, Nodes: 1}
	var cpuUser, cpuSys float64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		var err error
		switch {
		case strings.HasPrefix(key, "cmdstat_"):
			name := strings.TrimPrefix(key, "cmdstat_")
			var c Command
			if c, err = parseCommand(value); err == nil && !own[name] {
				r.Commands[name] = c
			}
		case key == "total_reads_processed":
			r.ReadsProcessed, err = strconv.ParseInt(value, 10, 64)
		case key == "used_cpu_user":
			cpuUser, err = strconv.ParseFloat(value, 64)
		case key == "used_cpu_sys":
			cpuSys, err = strconv.ParseFloat(value, 64)
		}
		if err != nil {
			return Reading{}, fmt.Errorf("redisstats: INFO line %q: %w", line, err)
		}
	}
	r.CPU = time.Duration((cpuUser + cpuSys) * float64(time.Second)).Round(time.Microsecond)
	r.UserCPU = time.Duration(cpuUser * float64(time.Second)).Round(time.Microsecond)
	return r, sc.Err()
}

// parseCommand reads "calls=3,usec=27,usec_per_call=9.00,…".
func parseCommand(fields string) (Command, error) {
	var c Command
	var seen int
	for f := range strings.SplitSeq(fields, ",") {
		k, v, _ := strings.Cut(f, "=")
		var dst *int64
		switch k {
		case "calls":
			dst = &c.Calls
		case "usec":
			dst = &c.Usec
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, err
		}
		*dst = n
		seen++
	}
	if seen != 2 {
		return c, fmt.Errorf("no calls= and usec=")
	}
	return c, nil
}

// Sub returns r − before: what happened between two readings of the same
// servers. A command missing from before counts from zero (it had not run,
// or the stats were reset).
func (r Reading) Sub(before Reading) Reading {
	return r.add(before, -1)
}

// Add returns r + o: what happened over two intervals (differences made by
// Sub) of the same servers.
func (r Reading) Add(o Reading) Reading {
	return r.add(o, 1)
}

func (r Reading) add(o Reading, sign int64) Reading {
	out := Reading{
		Commands:       make(map[string]Command, len(r.Commands)+len(o.Commands)),
		ReadsProcessed: r.ReadsProcessed + sign*o.ReadsProcessed,
		CPU:            r.CPU + time.Duration(sign)*o.CPU,
		UserCPU:        r.UserCPU + time.Duration(sign)*o.UserCPU,
		Nodes:          max(r.Nodes, o.Nodes),
	}
	for name, c := range r.Commands {
		out.Commands[name] = c
	}
	for name, c := range o.Commands {
		s := out.Commands[name]
		s.Calls += sign * c.Calls
		s.Usec += sign * c.Usec
		out.Commands[name] = s
	}
	return out
}

// Calls is every command run, those that scripts ran included (a script
// that reads three keys and writes three is seven calls: its EVALSHA and
// six).
func (r Reading) Calls() int64 {
	var n int64
	for _, c := range r.Commands {
		n += c.Calls
	}
	return n
}

// ScriptCalls is the scripts run: EVAL, EVALSHA, FCALL and their _RO forms.
func (r Reading) ScriptCalls() int64 {
	var n int64
	for name, c := range r.Commands {
		if scripts[name] {
			n += c.Calls
		}
	}
	return n
}

// ScriptUsec is the µs the scripts took, the commands they ran included.
func (r Reading) ScriptUsec() int64 {
	var n int64
	for name, c := range r.Commands {
		if scripts[name] {
			n += c.Usec
		}
	}
	return n
}

// Usec is the µs Redis spent running commands, each counted once: the
// scripts' time (which includes the commands they ran), plus that of the
// other commands when no script ran. When scripts ran, the other commands
// are taken to be theirs (already inside the scripts' time): exact for
// llmguard's stores, which send only scripts; a client that also sends
// plain commands beside scripts has those left out (see Commands).
func (r Reading) Usec() int64 {
	if r.ScriptCalls() > 0 {
		return r.ScriptUsec()
	}
	var n int64
	for _, c := range r.Commands {
		n += c.Usec
	}
	return n
}

// PerRequest is a Reading divided by the requests served over it.
type PerRequest struct {
	Requests int64
	Calls    float64 // commands, those scripts ran included
	Scripts  float64 // scripts run (EVALSHA…): script round trips' work
	Reads    float64 // reads of client connections: about round trips
	Usec     float64 // µs running commands (Usec)
	CPU      float64 // µs of process CPU, network I/O included
	UserCPU  float64 // µs of the process's user CPU (scripts, commands)
	// ByCommand is each command's calls and µs per request.
	ByCommand map[string][2]float64
}

// Per divides r by requests (at least 1).
func (r Reading) Per(requests int64) PerRequest {
	n := float64(max(requests, 1))
	p := PerRequest{
		Requests:  requests,
		Calls:     float64(r.Calls()) / n,
		Scripts:   float64(r.ScriptCalls()) / n,
		Reads:     float64(r.ReadsProcessed) / n,
		Usec:      float64(r.Usec()) / n,
		CPU:       float64(r.CPU.Microseconds()) / n,
		UserCPU:   float64(r.UserCPU.Microseconds()) / n,
		ByCommand: make(map[string][2]float64, len(r.Commands)),
	}
	for name, c := range r.Commands {
		if c.Calls != 0 {
			p.ByCommand[name] = [2]float64{float64(c.Calls) / n, float64(c.Usec) / n}
		}
	}
	return p
}
