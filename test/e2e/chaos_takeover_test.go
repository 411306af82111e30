//go:build integration

package cli_test

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// The oracle's G3 takeover (issue 40): two writing runs where the first
// loses its Lease. The first run is stopped (SIGSTOP) past its
// --lock-duration, a second starts and takes the expired Lease over, and
// the first is let go on (SIGCONT) while the second writes. The contract
// (docs/spec.md#run-lease): a run that has not renewed its Lease for two
// thirds of --lock-duration stops acting at once (no new create or delete)
// and exits 1; so after the first run's last renewal the server accepted
// (sent then) plus two thirds of its --lock-duration it sends no create and
// no delete, and its writes before that never interleave with the
// second's.

// takeover is the pair of one takeover iteration, by pid, with when the
// first was stopped and let go on.
type takeover struct {
	a, b             int
	stopped, resumed time.Time
	lockDuration     time.Duration
}

// takeoverLock is the --lock-duration of a takeover pair: the base's 3 s.
const takeoverLock = 3 * time.Second

// runTakeover runs the takeover pair with the iteration's flags: the
// first starts, is stopped after 0.1 to 1 s for --lock-duration plus 0.5
// to 2 s, the second starts then; the first goes on once the second's
// Lease was accepted (or 3 s passed) and 0 to 1.5 s more.
func (c *chaosTest) runTakeover(args []string) []chaosProc {
	w := c.w
	cmd := exec.Command(c.bin, args...)
	cmd.Env = []string{"HOME=" + os.TempDir()}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("takeover: start the first run: %v", err)
	}
	a := chaosProc{pid: cmd.Process.Pid}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	tk := &takeover{a: a.pid, lockDuration: takeoverLock}
	ended := false
	var errA error
	select {
	case errA = <-waited:
		ended = true
	case <-time.After(time.Duration(100+c.rng.Intn(900)) * time.Millisecond):
	}
	stopFor := takeoverLock + time.Duration(500+c.rng.Intn(1500))*time.Millisecond
	resumeAfter := time.Duration(c.rng.Intn(1500)) * time.Millisecond
	var b chaosProc
	bDone := make(chan struct{})
	if !ended {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			c.t.Fatalf("takeover: stop run %d: %v", a.pid, err)
		}
		tk.stopped = time.Now()
		time.Sleep(stopFor)
		go func() {
			defer close(bDone)
			b = startChaosProc(c.bin, args, 0)
		}()
		// Let the first go on once the second holds the Lease.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if w.oracle.leaseTaken(a.pid, tk.stopped) {
				break
			}
			select {
			case <-bDone:
				deadline = time.Now()
			case <-time.After(20 * time.Millisecond):
			}
		}
		time.Sleep(resumeAfter)
		tk.resumed = time.Now()
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			c.t.Fatalf("takeover: let run %d go on: %v", a.pid, err)
		}
		select {
		case errA = <-waited:
		case <-time.After(chaosRunTimeout):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			errA = <-waited
			a.hung = true
		}
		<-bDone
	}
	a.code = exitCode(errA)
	a.stdout, a.stderr = out.String(), errOut.String()
	if ended {
		c.stats.TakeoverEndedFirst++
		return []chaosProc{a}
	}
	tk.b = b.pid
	c.t.Logf("iteration %d: takeover: run %d stopped %s to %s, exit %d; run %d exit %d", w.iteration, a.pid,
		tk.stopped.Format("15:04:05.000"), tk.resumed.Format("15:04:05.000"), a.code, b.pid, b.code)
	w.mu.Lock()
	w.takeover = tk
	w.mu.Unlock()
	c.stats.Takeovers++
	return []chaosProc{a, b}
}

// leaseTaken reports whether the proxy saw the server accept a Lease write
// of a process other than pid sent after since.
func (l *oracleLog) leaseTaken(pid int, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.answered {
		if q.pid != pid && q.lease() && q.code/100 == 2 && (q.verb == "create" || q.verb == "update") && q.sent.After(since) {
			return true
		}
	}
	return false
}

// judgeTakeoverLocked judges a takeover pair (G3): the first run sends no
// create and no delete after its last accepted renewal (before the
// second's Lease) plus two thirds of its --lock-duration; its writes up to
// then end before the second's first. It returns the pair's pids, which
// the general no-interleaving check leaves to it. Called with mu held.
func (c *chaosTest) judgeTakeoverLocked(attempts, answered []oracleRequest, bad func(string, ...any)) (int, int) {
	tk := c.w.takeover
	c.w.takeover = nil
	if tk == nil {
		return 0, 0
	}
	var bLease time.Time // the second's first Lease write accepted
	for _, q := range answered {
		if q.pid == tk.b && q.lease() && q.code/100 == 2 && (q.verb == "create" || q.verb == "update") && (bLease.IsZero() || q.done.Before(bLease)) {
			bLease = q.done
		}
	}
	if bLease.IsZero() {
		c.stats.TakeoverRefused++ // the second found the Lease live (exit 5): no takeover
		return tk.a, tk.b
	}
	c.stats.TakeoversJudged++
	var renewed time.Time // the first's last accepted Lease write before the second's
	for _, q := range answered {
		if q.pid == tk.a && q.lease() && q.code/100 == 2 && (q.verb == "create" || q.verb == "update") && q.done.Before(bLease) && q.sent.After(renewed) {
			renewed = q.sent
		}
	}
	if renewed.IsZero() {
		// Stopped before its Lease: no takeover; the general checks
		// judge the pair (the first writes nothing before its Lease).
		c.stats.TakeoversJudged--
		c.stats.TakeoverFirstWithoutLease++
		return 0, 0
	}
	stopAt := renewed.Add(tk.lockDuration * 2 / 3)
	var aLast, bFirst time.Time
	for _, q := range answered {
		if q.lease() {
			continue
		}
		switch {
		case q.pid == tk.a && !q.sent.After(stopAt) && q.done.After(aLast):
			aLast = q.done
		case q.pid == tk.b && (bFirst.IsZero() || q.sent.Before(bFirst)):
			bFirst = q.sent
		}
	}
	// A write reaching the proxy after stopAt may have been handed to its
	// connection before the stop: its Pvc-Janitor-Lease-Checked header
	// says when the run's Lease vouched for it, which must be in time
	// (docs/spec.md#run-lease). The first run's own deadline is no later
	// than stopAt: it counts from when it sent the renewal, before the
	// proxy did.
	for _, q := range attempts {
		if q.pid != tk.a || q.lease() {
			continue
		}
		if q.at.After(stopAt) {
			c.stats.TakeoverInFlight++
		}
		if q.checked.IsZero() || q.checked.After(stopAt) {
			c.stats.TakeoverLateWrites++
			bad("takeover: run %d sent %s %s/%s at %s, checked %s, after its last accepted renewal (sent %s) plus two thirds of --lock-duration %s (stopped %s, let go on %s; run %d took the Lease over at %s)",
				tk.a, strings.ToUpper(q.verb), q.resource, q.name, q.at.Format("15:04:05.000"), q.checked.Format("15:04:05.000"),
				renewed.Format("15:04:05.000"), tk.lockDuration, tk.stopped.Format("15:04:05.000"), tk.resumed.Format("15:04:05.000"),
				tk.b, bLease.Format("15:04:05.000"))
		}
	}
	if !aLast.IsZero() && !bFirst.IsZero() && !aLast.Before(bFirst) {
		bad("takeover: run %d's writes until it had to stop (last answered %s) and run %d's (first sent %s) interleave", tk.a,
			aLast.Format("15:04:05.000"), tk.b, bFirst.Format("15:04:05.000"))
	}
	if !aLast.IsZero() && !bFirst.IsZero() {
		c.stats.TakeoversBothWrote++
	}
	return tk.a, tk.b
}
