package cli

import (
	"reflect"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestOnePolicyForEveryCommand: the configuration's classify.Policy is
// built in one place (session.policy), which carries every field of the
// policy, and every command classifies by it: the scans (scan, snapshot,
// reap, run, explain, guard, export) and restore, whose copy of the
// mapping once left out the notice period and the snooze (issue 44).
func TestOnePolicyForEveryCommand(t *testing.T) {
	cfg := &config.Config{WorkspaceLabel: "ws", MinAge: time.Minute, GracePeriod: 2 * time.Minute,
		NoticePeriod: 3 * time.Minute, MaxSnooze: 4 * time.Minute, TrustExistingSnapshots: true,
		ClockSkew: 5 * time.Second, SessionsCarryData: true}
	sess := &session{cfg: cfg}
	p := sess.policy()
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("session.policy leaves classify.Policy.%s unset", v.Type().Field(i).Name)
		}
	}
	if p.NoticePeriod != cfg.NoticePeriod || p.MaxSnooze != cfg.MaxSnooze || p.GracePeriod != cfg.GracePeriod {
		t.Errorf("policy %+v does not carry the configuration's notice, snooze and grace", p)
	}
	for name, got := range map[string]classify.Policy{
		"restore": sess.restoreOptions().Policy,
		"scan":    sess.scanOptions(false).Policy,
		"explain": sess.readOnlyScanOptions().Policy,
		"reap":    sess.reapOptions(nil).Scan.Policy,
		"rescue":  sess.rescueOptions(nil).Scan.Policy,
	} {
		if got != p {
			t.Errorf("%s classifies by %+v, not the configuration's policy %+v", name, got, p)
		}
	}
}
