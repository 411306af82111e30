package rescue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

func TestDecide(t *testing.T) {
	started := t0
	o := waitOptions{Timeout: 10 * time.Minute, ErrorGrace: 2 * time.Minute}
	content := func(mod ...func(*inventory.Content)) *inventory.Content {
		c := &inventory.Content{Name: "snapcontent-1", SnapshotUID: "s1", HasHandle: true}
		for _, m := range mod {
			m(c)
		}
		return c
	}
	snap := func(mod ...func(*inventory.Snapshot)) *inventory.Snapshot {
		s := &inventory.Snapshot{Name: "ws-a-rescue-0123456789", UID: "s1", ContentName: "snapcontent-1"}
		for _, m := range mod {
			m(s)
		}
		return s
	}
	ready := func(s *inventory.Snapshot) { s.ReadyToUse = true }
	failing := func(at time.Time) func(*inventory.Snapshot) {
		return func(s *inventory.Snapshot) { s.Error = &inventory.SnapshotError{Message: "disk on fire", Time: at} }
	}
	deleting := func(s *inventory.Snapshot) { s.DeletionTimestamp = tp(t0) }
	refused := errors.New("connection refused")
	cases := []struct {
		name      string
		ob        observation
		errSeen   time.Time
		now       time.Time
		want      waitResult
		msg       string
		next      time.Duration
		errorSeen time.Time
	}{
		{name: "intact", ob: observation{Snapshot: snap(ready), Content: content()}, now: t0.Add(time.Second), want: waitReady},
		{name: "ready, no content yet", ob: observation{Snapshot: snap(ready)}, now: t0.Add(time.Second),
			want: waitPending, msg: "does not exist", next: notIntactPoll},
		{name: "ready, not bound", ob: observation{Snapshot: snap(ready, func(s *inventory.Snapshot) { s.ContentName = "" })}, now: t0,
			want: waitPending, msg: "bound to no VolumeSnapshotContent", next: notIntactPoll},
		{name: "ready, content of another snapshot", ob: observation{Snapshot: snap(ready), Content: content(func(c *inventory.Content) { c.SnapshotUID = "other" })},
			now: t0, want: waitPending, msg: `bound to snapshot UID "other"`, next: notIntactPoll},
		{name: "ready, content without handle", ob: observation{Snapshot: snap(ready), Content: content(func(c *inventory.Content) { c.HasHandle = false })},
			now: t0, want: waitPending, msg: "no snapshotHandle", next: notIntactPoll},
		{name: "ready, content being deleted", ob: observation{Snapshot: snap(ready), Content: content(func(c *inventory.Content) { c.DeletionTimestamp = tp(t0) })},
			now: t0, want: waitPending, msg: "is being deleted", next: notIntactPoll},
		{name: "ready, not intact, at the timeout", ob: observation{Snapshot: snap(ready)}, now: t0.Add(o.Timeout),
			want: waitTimeout, msg: "ready but not intact"},
		{name: "ready with an error is not ready", ob: observation{Snapshot: snap(ready, failing(t0)), Content: content()}, now: t0.Add(time.Minute),
			want: waitPending, msg: "disk on fire", next: time.Minute, errorSeen: t0},
		{name: "being deleted, even if ready", ob: observation{Snapshot: snap(ready, deleting), Content: content()}, now: t0, want: waitDeleting, msg: "being deleted"},
		{name: "gone", ob: observation{}, now: t0, want: waitDeleting, msg: "deleted while waiting"},
		{name: "not ready yet", ob: observation{Snapshot: snap()}, now: t0.Add(time.Minute), want: waitPending, next: 9 * time.Minute},
		{name: "error within grace", ob: observation{Snapshot: snap(failing(t0.Add(time.Minute)))}, now: t0.Add(2 * time.Minute),
			want: waitPending, msg: "disk on fire", next: time.Minute, errorSeen: t0.Add(time.Minute)},
		{name: "error persisted, by its own time", ob: observation{Snapshot: snap(failing(t0.Add(-time.Hour)))}, now: t0,
			want: waitError, msg: "disk on fire", errorSeen: t0.Add(-time.Hour)},
		{name: "error persisted, since first seen", ob: observation{Snapshot: snap(failing(time.Time{}))}, errSeen: t0.Add(time.Minute),
			now: t0.Add(3 * time.Minute), want: waitError, msg: "disk on fire", errorSeen: t0.Add(time.Minute)},
		{name: "error without time, first seen now", ob: observation{Snapshot: snap(failing(time.Time{}))}, now: t0.Add(time.Minute),
			want: waitPending, msg: "disk on fire", next: 2 * time.Minute, errorSeen: t0.Add(time.Minute)},
		{name: "error time in the future counts from now", ob: observation{Snapshot: snap(failing(t0.Add(time.Hour)))}, now: t0,
			want: waitPending, next: 2 * time.Minute, errorSeen: t0},
		{name: "error cleared", ob: observation{Snapshot: snap()}, errSeen: t0, now: t0.Add(5 * time.Minute),
			want: waitPending, next: 5 * time.Minute},
		{name: "timeout without error", ob: observation{Snapshot: snap()}, now: t0.Add(o.Timeout), want: waitTimeout},
		{name: "timeout with an error within grace", ob: observation{Snapshot: snap(failing(t0.Add(9 * time.Minute)))}, now: t0.Add(o.Timeout),
			want: waitTimeout, msg: "disk on fire", errorSeen: t0.Add(9 * time.Minute)},
		{name: "error ends the grace before the timeout", ob: observation{Snapshot: snap(failing(t0.Add(9 * time.Minute)))}, now: t0.Add(9*time.Minute + 30*time.Second),
			want: waitPending, next: 30 * time.Second, errorSeen: t0.Add(9 * time.Minute)},
		// What could not be read decides nothing, except that the wait
		// still ends on time.
		{name: "snapshot not read", ob: observation{ReadErr: refused}, errSeen: t0.Add(time.Minute), now: t0.Add(2 * time.Minute),
			want: waitPending, next: readRetry, errorSeen: t0.Add(time.Minute)},
		{name: "content not read", ob: observation{Snapshot: snap(ready), ReadErr: refused}, now: t0,
			want: waitPending, next: readRetry},
		{name: "not read, an error past its grace decides nothing", ob: observation{Snapshot: snap(failing(t0.Add(-time.Hour))), ReadErr: refused},
			now: t0, want: waitPending, next: readRetry},
		{name: "not read at the timeout", ob: observation{ReadErr: refused}, errSeen: t0, now: t0.Add(o.Timeout),
			want: waitTimeout, msg: "could not read the snapshot: connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := decide(c.ob, waitState{Started: started, ErrorSeen: c.errSeen}, c.now, o)
			if v.Result != c.want {
				t.Fatalf("result %s (%q), want %s", v.Result, v.Message, c.want)
			}
			if !strings.Contains(v.Message, c.msg) {
				t.Errorf("message %q, want it to contain %q", v.Message, c.msg)
			}
			if c.next != 0 && v.Next != c.next {
				t.Errorf("next %s, want %s", v.Next, c.next)
			}
			if !v.ErrorSeen.Equal(c.errorSeen) {
				t.Errorf("error seen %s, want %s", v.ErrorSeen, c.errorSeen)
			}
		})
	}
}
