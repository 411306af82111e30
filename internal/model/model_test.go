package model

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

// defaultChecks is how many histories `go test ./internal/model/` (and so
// make unit) runs when -rapid.checks is not given; make model passes more.
const defaultChecks = 10000

// env knobs for finding runs (docs/testing.md#the-model-checker):
// MODEL_IGNORE lists invariants (lost, guard, restore, notice, held) whose
// violations do not fail a history; MODEL_OFF lists traits never drawn
// (label, nolabel, spawner, unique, slots, backup, restore, notice,
// hold, retention, discard, condition, guard; oneclaim: every workspace has
// two claims; sessions: one platform session per user; shortnotice: no notice shorter than a run; emptyhome: a new home claim always starts from a snapshot).
// MODEL_ON lists traits drawn only when asked: ahead (a run's clock ten
// minutes ahead of the API server's, finding H: no pure decision can see
// it, kube.ServerClock must not keep such a clock).
var (
	ignore = set(os.Getenv("MODEL_IGNORE"))
	off    = set(os.Getenv("MODEL_OFF"))
	on     = set(os.Getenv("MODEL_ON"))
)

func set(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			m[f] = true
		}
	}
	return m
}

func TestModel(t *testing.T) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if !explicit && os.Getenv("RAPID_CHECKS") == "" {
		if err := flag.Set("rapid.checks", itoa(defaultChecks)); err != nil {
			t.Fatal(err)
		}
	}
	rapid.Check(t, history)
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// pick draws one of vs.
func pick[V any](t *rapid.T, label string, vs []V) V {
	return rapid.SampledFrom(vs).Draw(t, label)
}

func boolUnless(t *rapid.T, label, offTrue, offFalse string) bool {
	switch {
	case off[offTrue]:
		return false
	case off[offFalse]:
		return true
	}
	return rapid.Bool().Draw(t, label)
}

func drawConfig(t *rapid.T) (Config, int) {
	var c Config
	if boolUnless(t, "workspace label", "label", "nolabel") {
		c.Policy.WorkspaceLabel = WorkspaceLabel
	}
	c.Policy.MinAge = 10 * time.Minute
	c.Policy.GracePeriod = pick(t, "grace", []time.Duration{0, 30 * time.Minute})
	if !off["notice"] {
		notices := []time.Duration{0, 0, 30 * time.Second, 10 * time.Minute}
		if off["shortnotice"] {
			notices = []time.Duration{0, 10 * time.Minute}
		}
		c.Policy.NoticePeriod = pick(t, "notice", notices)
	}
	c.Policy.MaxSnooze = 720 * time.Hour
	c.Policy.ClockSkew = pick(t, "clock skew", []time.Duration{0, 2 * time.Second, 30 * time.Second})
	sup := []string{classify.SupersededKeep, classify.SupersededArchive, classify.SupersededDiscard}
	if off["discard"] {
		sup = sup[:2]
	}
	c.Superseded = pick(t, "superseded", sup)
	if !off["retention"] {
		c.KeepFor = pick(t, "keep-for", []time.Duration{0, time.Hour, 24 * time.Hour})
		c.KeepLast = pick(t, "keep-last", []int{0, 1, 2})
	}
	c.DeleteContents = rapid.Bool().Draw(t, "delete contents")
	c.RescueRetain = rapid.Bool().Draw(t, "rescue class Retain")
	if boolUnless(t, "unique names", "unique", "spawner") {
		c.Platform = Unique
	}
	c.Condition = boolUnless(t, "Unused condition", "condition", "")
	c.Slots = boolUnless(t, "two claims per workspace", "slots", "oneclaim")
	labels := 0 // 0 every claim labelled, 1 none, 2 drawn per claim
	if c.Policy.WorkspaceLabel != "" {
		labels = pick(t, "claim labels", []int{0, 0, 1, 2})
	}
	return c, labels
}

// offsets draws a clock offset within ±skew/2: any two clocks then differ
// by at most --clock-skew.
func offset(t *rapid.T, label string, skew time.Duration) time.Duration {
	half := int(skew / 2 / time.Second)
	return time.Duration(rapid.IntRange(-half, half).Draw(t, label)) * time.Second
}

func describe(c Config) string {
	var b strings.Builder
	b.WriteString("config:")
	if c.Policy.WorkspaceLabel != "" {
		b.WriteString(" --workspace-label " + c.Policy.WorkspaceLabel)
	} else {
		b.WriteString(" no --workspace-label")
	}
	b.WriteString(" --grace-period " + c.Policy.GracePeriod.String())
	b.WriteString(" --notice-period " + c.Policy.NoticePeriod.String())
	b.WriteString(" --clock-skew " + c.Policy.ClockSkew.String())
	b.WriteString(" --superseded " + c.Superseded)
	if c.KeepFor > 0 {
		b.WriteString(" --keep-for " + c.KeepFor.String())
	}
	if c.KeepLast > 0 {
		b.WriteString(" --keep-last " + itoa(c.KeepLast))
	}
	if c.DeleteContents {
		b.WriteString(" --delete-contents")
	}
	if c.RescueRetain {
		b.WriteString("; rescues Retain")
	} else {
		b.WriteString("; rescues Delete")
	}
	if c.Platform == Spawner {
		b.WriteString("; claims claim-<user> (names reused)")
	} else {
		b.WriteString("; a new claim per session")
	}
	if c.Slots {
		b.WriteString(", home and data claims")
	}
	if c.Condition {
		b.WriteString("; Kubernetes 1.37 (Unused condition)")
	} else {
		b.WriteString("; Kubernetes 1.35 (no Unused condition)")
	}
	return b.String()
}

func history(t *rapid.T) {
	cfg, labels := drawConfig(t)
	w := NewWorld(cfg)
	w.StorageOffset = offset(t, "storage clock", cfg.Policy.ClockSkew)
	w.CMOffset = offset(t, "controller manager clock", cfg.Policy.ClockSkew)
	user := rapid.SampledFrom(Users)
	actions := map[string]func(*rapid.T){
		"start": func(t *rapid.T) {
			u := user.Draw(t, "user")
			from := make([]From, 2)
			for i := range from {
				from[i] = pick(t, "from", []From{Empty, FromSnapshot})
			}
			if off["emptyhome"] {
				from[0] = FromSnapshot
			}
			labeled := labels == 0 || (labels == 2 && rapid.Bool().Draw(t, "labeled"))
			if off["sessions"] && w.session[u] > 0 {
				return
			}
			w.StartSession(u, from, labeled)
		},
		"mount": func(t *rapid.T) { w.Mount(user.Draw(t, "user"), rapid.IntRange(0, 9).Draw(t, "which")) },
		"write": func(t *rapid.T) { w.Write(user.Draw(t, "user"), rapid.IntRange(0, 1).Draw(t, "slot")) },
		"end":   func(t *rapid.T) { w.EndSession(user.Draw(t, "user")) },
		"wait": func(t *rapid.T) {
			w.Advance(pick(t, "wait", []time.Duration{time.Second, 30 * time.Second, 5 * time.Minute, 20 * time.Minute,
				40 * time.Minute, 2 * time.Hour, 26 * time.Hour}))
		},
		"run": func(t *rapid.T) {
			r := Run{Duration: pick(t, "run takes", []time.Duration{0, 5 * time.Second, 2 * time.Minute})}
			if on["ahead"] {
				r.Ahead = pick(t, "clock ahead", []time.Duration{0, 0, 0, 0, 10 * time.Minute})
			}
			w.JanitorRun(r)
		},
	}
	if !off["backup"] {
		actions["backup"] = func(t *rapid.T) {
			w.Backup(rapid.IntRange(0, 9).Draw(t, "claim"), rapid.Bool().Draw(t, "source uid"),
				rapid.Bool().Draw(t, "retain"), rapid.Bool().Draw(t, "then delete the claim"))
		}
	}
	if !off["hold"] {
		actions["hold"] = func(t *rapid.T) {
			w.Hold(rapid.Bool().Draw(t, "on a claim"), rapid.IntRange(0, 9).Draw(t, "which"),
				pick(t, "value", []string{"true", "True"}), rapid.Bool().Draw(t, "as a label"))
		}
	}
	if !off["restore"] {
		actions["restore"] = func(t *rapid.T) {
			w.Restore(RestoreReq{Kind: rapid.IntRange(ByClaim, ByFrom).Draw(t, "restore kind"), Pick: rapid.IntRange(0, 9).Draw(t, "which"),
				As: rapid.Bool().Draw(t, "--as"), AllowOlder: rapid.Bool().Draw(t, "--allow-older")})
		}
	}
	if !off["guard"] {
		actions["guard"] = func(*rapid.T) { w.Guard() }
	}
	if cfg.Condition {
		actions["controller manager"] = func(t *rapid.T) { w.ControllerManager(rapid.Bool().Draw(t, "down")) }
	}
	actions[""] = func(t *rapid.T) {
		var failed []string
		for _, v := range w.Violations {
			name, _, _ := strings.Cut(v, ":")
			if !ignore[name] {
				failed = append(failed, v)
			}
		}
		w.Violations = nil
		if len(failed) > 0 {
			t.Fatalf("%s\n\n%s\n%s", strings.Join(failed, "\n"), describe(cfg), w.Story())
		}
	}
	t.Repeat(actions)
}
