//go:build unix

package redistest

import "syscall"

// Pause freezes the server's process with SIGSTOP, as a stalled host or a
// debugger would: its port still accepts connections and the kernel queues
// what clients send, but nothing is read or answered until resume
// continues it with SIGCONT, when Redis runs every command queued meanwhile
// (commands their clients have already given up on included). resume is
// safe to call more than once; t.Cleanup resumes a server the test left
// paused, so that its stop is not held up. Pause fails the test on a
// server that is not running and on a shared server (Shared,
// SharedCluster).
func (s *Server) Pause() (resume func()) {
	s.t.Helper()
	if s.owner != nil {
		s.t.Fatal(sharedNote(s))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatal("redistest: Pause on a server that is not running")
	}
	p := s.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("redistest: SIGSTOP: %v", err)
	}
	resume = func() { _ = p.Signal(syscall.SIGCONT) }
	s.t.Cleanup(resume)
	return resume
}
