// Package ptytest gives tests a real pseudo-terminal, so that a command's
// prompt is driven as a user at a keyboard drives it (the confirmation of
// internal/cli and the cluster tests of test/e2e).
package ptytest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// Open opens a pseudo-terminal pair through /dev/ptmx: the master is the
// keyboard, the slave the janitor's stdin. The test makes its own terminal
// (posix_openpt, then unlockpt and ptsname by ioctl: grantpt has nothing to
// do on Linux's devpts), so a host without one fails the test rather than
// skipping what it checks.
func Open(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Fatalf("unlockpt (TIOCSPTLCK): %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Fatalf("ptsname (TIOCGPTN): %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open the pseudo-terminal's slave: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	if !term.IsTerminal(s) {
		t.Fatalf("%s is not a terminal", s.Name())
	}
	return m, s
}
