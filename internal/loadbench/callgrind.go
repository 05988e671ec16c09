package loadbench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// A redis-server run under valgrind's callgrind (RedisWorkOptions.Callgrind)
// counts every instruction it executes: a measure of its work that, unlike
// CPU time, does not depend on what else the machine runs. callgrind_control
// zeroes the count before a run and dumps it after.

// errNoValgrind is returned when the callgrind mode is asked for and
// valgrind or callgrind_control cannot be found.
var errNoValgrind = errors.New("loadbench: valgrind and callgrind_control not found on $PATH: install valgrind, or leave -callgrind out")

// zero sets the server's instruction count to zero. Errors: callgrind_control
// fails.
func (s *redisServer) zero() error {
	if out, err := exec.Command("callgrind_control", "-z", strconv.Itoa(s.pid())).CombinedOutput(); err != nil {
		return fmt.Errorf("loadbench: callgrind_control -z: %v: %s", err, out)
	}
	return nil
}

// instructions returns the instructions the server executed since zero:
// it has callgrind dump its counts and reads the "summary:" line of the
// newest dump. Errors: callgrind_control fails, or no dump can be read.
func (s *redisServer) instructions() (int64, error) {
	if out, err := exec.Command("callgrind_control", "-d", strconv.Itoa(s.pid())).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("loadbench: callgrind_control -d: %v: %s", err, out)
	}
	dumps, err := filepath.Glob(filepath.Join(s.dir, "cg."+strconv.Itoa(s.pid())+".*"))
	if err != nil || len(dumps) == 0 {
		return 0, fmt.Errorf("loadbench: no callgrind dump in %s", s.dir)
	}
	newest, last := "", -1
	for _, d := range dumps {
		if n, err := strconv.Atoi(d[strings.LastIndexByte(d, '.')+1:]); err == nil && n > last {
			newest, last = d, n
		}
	}
	f, err := os.Open(newest)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if keep := os.Getenv("LLMGUARD_CALLGRIND_KEEP"); keep != "" {
		keepDump(keep, newest)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("loadbench: no summary line in %s", newest)
}

// zeroAll zeroes the counts of every server in servers (see zero).
func zeroAll(servers []*redisServer) error {
	for _, s := range servers {
		if err := s.zero(); err != nil {
			return err
		}
	}
	return nil
}

// instructionsOf is the sum of instructions() over servers: what they
// executed since their counts were zeroed. Errors: the first server's
// that fails.
func instructionsOf(servers []*redisServer) (int64, error) {
	var sum int64
	for _, s := range servers {
		n, err := s.instructions()
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// keepDump copies the callgrind dump at path into the directory dir (made
// if missing) under a name of its own (the dump's, then a count), so a run's
// dumps can be read by function afterwards (callgrind_annotate
// --inclusive=yes). A copy that fails is reported on stderr and skipped: the
// count read from the dump stands.
func keepDump(dir, path string) {
	data, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		name := filepath.Join(dir, filepath.Base(filepath.Dir(path))+"-"+filepath.Base(path))
		err = os.WriteFile(name, data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadbench: LLMGUARD_CALLGRIND_KEEP: %v\n", err)
	}
}
