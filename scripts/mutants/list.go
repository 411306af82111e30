package main

// mutant is one small change of a safety rule that the pure tests of Pkgs
// must notice. It is defined by a search string and its replacement, not
// by a line number, so that it survives edits around it; a search string
// that is not in File exactly once fails the gate (update the mutant, or
// drop it with the rule it checked).
type mutant struct {
	ID      string
	File    string
	Search  string
	Replace string
	Pkgs    []string
	Why     string
}

var (
	classifyPkg  = []string{"./internal/classify/"}
	reapPkg      = []string{"./internal/reap/"}
	rescuePkg    = []string{"./internal/rescue/"}
	markPkg      = []string{"./internal/mark/"}
	inventoryPkg = []string{"./internal/inventory/"}
	// descentPkg: the judge and the packages that ask it (issue 38).
	descentPkg = []string{"./internal/classify/", "./internal/retention/"}
	guardPkg   = []string{"./internal/janitor/"}
	restorePkg = []string{"./internal/restore/"}
	kubePkg    = []string{"./internal/kube/"}
	lockPkg    = []string{"./internal/lock/"}
)

// mutants: M01-M25 are the test audit's of 2f2dc47 (issue 40) that survived
// every deterministic test then; the others are this list's own. Few live
// in files under rewrite (classify/lineage.go, retention, prune, restore,
// janitor/guard.go).
var mutants = []mutant{
	// Descent (issue 38, docs/spec.md#rule-descent).
	{ID: "D01", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "\tif y.isClaim() && !y.InUse {\n\t\treturn heldNot, -1", Replace: "\tif false {\n\t\treturn heldNot, -1",
		Why: "a claim not in use holds what it descends from"},
	{ID: "D02", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "a.Source == x.Source && !a.DataTime.Before(x.DataTime)", Replace: "a.Source == x.Source",
		Why: "a claim restored from an older snapshot of a claim holds its newer ones"},
	{ID: "D03", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "return !s.Snapshot.CreationTimestamp.After(c.Claim.CreationTimestamp)", Replace: "return true",
		Why: "a snapshot created after a claim, of the name its dataSource gives, is its source"},
	{ID: "D04", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "\t\tcase Newer(y, x) && l.asNew(y, x):", Replace: "\t\tcase !y.DataTime.Before(x.DataTime):",
		Why: "two snapshots of one claim with equal data times hold each other"},
	{ID: "D05", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "l.Carry && !x.Workspace.Own && !y.Workspace.Own && carries(y, x)", Replace: "l.Carry && carries(y, x)",
		Why: "--sessions-carry-data applies to a claim's own workspace (a reused name)"},
	{ID: "D06", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "\tif k := l.descends(j, x); k >= 0 {", Replace: "\tif k := l.descends(j, x); k >= 0 || y.Base.After(x.DataTime) {",
		Why: "the workspace's line holds without --sessions-carry-data (the chronological judge of 2f2dc47)"},
	{ID: "D07", File: "internal/janitor/guard.go", Pkgs: guardPkg,
		Search: "if !ok || !s.CreationTimestamp.Before(created) {", Replace: "if _ = created; true || !ok {",
		Why: "guard takes a snapshot of an earlier claim of a name for the live claim's"},
	{ID: "D08", File: "internal/janitor/guard.go", Pkgs: guardPkg,
		Search: "k := source{ns: s.Namespace, volume: inv.Contents[s.ContentName].SourceVolume}\n\t\t\t\tif k.volume == \"\" {", Replace: "k := source{ns: s.Namespace}\n\t\t\t\tif false {",
		Why: "guard groups someone else's snapshots by namespace, not by source volume"},
	{ID: "D09", File: "internal/restore/plan.go", Pkgs: restorePkg,
		Search: "\tif s.SourceClaim == \"\" {\n\t\treturn classify.DataTime(&s.Snapshot, nil)", Replace: "\tif true {\n\t\treturn classify.DataTime(&s.Snapshot, nil)",
		Why: "restore --from dates someone else's snapshot of an idle claim by its cut"},
	{ID: "D14", File: "internal/restore/plan.go", Pkgs: restorePkg,
		Search: "\t\tif rt := s.RestoredDataTime; rt != nil && rt.Before(t) {\n\t\t\tt = *rt\n\t\t}\n\t\treturn t", Replace: "\t\treturn t",
		Why: "restore weighs a rescue of a restored claim by its orphaned-since, not its restored data"},
	{ID: "D15", File: "internal/restore/plan.go", Pkgs: restorePkg,
		Search: "\treturn r.ClockSkew\n}", Replace: "\treturn 0\n}",
		Why: "restore compares a cut on the storage clock with a claim's last use without --clock-skew"},
	{ID: "D16", File: "internal/rescue/origin.go", Pkgs: rescuePkg,
		Search: "if s.Name != cl.DataSource || s.CreationTimestamp.After(cl.CreationTimestamp) {", Replace: "if s.Name != cl.DataSource {",
		Why: "a snapshot created after a claim, of the name its dataSource gives, dates the claim's rescue"},
	{ID: "D17", File: "internal/classify/lineage.go", Pkgs: descentPkg,
		Search: "\tif y.Recorded == x.Recorded || x.isClaim() {", Replace: "\tif true {",
		Why: "a data time read off a cut holds one recorded on the API server's clock without --clock-skew"},
	{ID: "D18", File: "internal/classify/classify.go", Pkgs: classifyPkg,
		Search: "case ev.lu.at.Add(ev.skew).After(t):", Replace: "case ev.lu.at.After(t):",
		Why: "an Unused condition within --clock-skew after the last use seen is trusted"},
	{ID: "D10", File: "internal/retention/retention.go", Pkgs: []string{"./internal/retention/"},
		Search: "if t := c.OrphanedSince; t != nil && t.Before(cp.DataTime) {", Replace: "if t := c.OrphanedSince; false && t != nil {",
		Why: "retention dates someone else's snapshot of an idle claim by its cut"},
	{ID: "D12", File: "internal/classify/types.go", Pkgs: []string{"./internal/classify/", "./internal/restore/"},
		Search: "(d.State == Held && (len(d.Referrers) > 0 || d.Marks.RecordsUse()))", Replace: "false",
		Why: "a held claim in use is dated by its old mark"},
	{ID: "D13", File: "internal/inventory/inventory.go", Pkgs: inventoryPkg,
		Search: "func HoldValue(v string) bool { return strings.EqualFold(v, \"true\") }", Replace: "func HoldValue(v string) bool { return v == \"true\" || strings.EqualFold(v, \"\") && false }",
		Why: "a hold on a rescue counts only when exactly \"true\""},
	// The audit's six survivors.
	{ID: "M01", File: "internal/classify/notice.go", Pkgs: classifyPkg,
		Search: "end.Before(d.OrphanedSince.Add(c.p.NoticePeriod))", Replace: "end.Before(*d.OrphanedSince)",
		Why: "a notice mark ending within [orphaned-since, +notice) counts as this period's"},
	{ID: "M10", File: "internal/reap/delete.go", Pkgs: reapPkg,
		Search: "if what, ok := c.Uses.Seen(cl.UID); ok {", Replace: "if what, ok := c.Uses.Seen(cl.UID); ok && false {",
		Why: "a claim seen in use earlier in the run is deleted in it"},
	{ID: "M14", File: "internal/classify/classify.go", Pkgs: classifyPkg,
		Search: "case t.Before(ev.lu.at):", Replace: "case t.Before(ev.lu.at.Add(-time.Second)):",
		Why: "an orphaned-since mark a second before the last use seen is trusted"},
	{ID: "M15", File: "internal/classify/classify.go", Pkgs: classifyPkg,
		Search: "case ev.lu.at.Add(ev.skew).After(t):", Replace: "case ev.lu.at.Add(-time.Second).After(t):",
		Why: "an Unused condition a second before the last use seen is trusted"},
	{ID: "M22", File: "internal/inventory/restoring.go", Pkgs: inventoryPkg,
		Search: "const RestoringFor = 24 * time.Hour", Replace: "const RestoringFor = 2 * time.Minute",
		Why: "a restore's source protected for 2 minutes, not a day"},
	{ID: "M25", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "if pct > maxPercent+1e-9 {", Replace: "if pct > maxPercent+1 {",
		Why: "--max-deletion-percent exceeded by one point"},

	// reap: what may be deleted, and the checks right before the delete.
	{ID: "R01", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "classify.GraceOver(*d.OrphanedSince, grace, now)", Replace: "classify.GraceOver(*d.OrphanedSince, grace, now.Add(time.Second))",
		Why: "a claim reaped a second before its grace period ends"},
	{ID: "R02", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "\t\treturn discard && d.Discard\n", Replace: "\t\treturn discard\n",
		Why: "a discard without durable evidence"},
	{ID: "R03", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "if !noticeOver(d, now) {", Replace: "if false && !noticeOver(d, now) {",
		Why: "a claim reaped before its owner's notice ends"},
	{ID: "R04", File: "internal/reap/reap.go", Pkgs: reapPkg,
		Search: "if !noticeOver(d, o.RunStart) {", Replace: "if false && !noticeOver(d, o.RunStart) {",
		Why: "a claim reaped in the run that began its notice (issue 38 finding G)"},
	{ID: "R05", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "if n > maxDeletions {", Replace: "if n > maxDeletions+1 {",
		Why: "--max-deletions exceeded by one"},
	{ID: "R06", File: "internal/reap/delete.go", Pkgs: reapPkg,
		Search: "if err := inUseNow(ctx, c, cl, o.Scope.PageSize, seen); err != nil {", Replace: "if err := inUseNow(ctx, c, cl, o.Scope.PageSize, seen); err != nil && false {",
		Why: "no pod check right before the delete"},
	{ID: "R07", File: "internal/reap/delete.go", Pkgs: reapPkg,
		Search: "return stillJustified(ctx, c, ev, o.Policy.WorkspaceLabel)", Replace: "return nil",
		Why: "the rescue not read again before the delete"},
	{ID: "R08", File: "internal/reap/delete.go", Pkgs: reapPkg,
		Search: "return code == 0 || code >= 500", Replace: "return code == 0 || code > 500",
		Why: "a 500 taken as a clean refusal: a lost deletion not settled as ours"},
	{ID: "R09", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "case cur == nil && maybeApplied:", Replace: "case cur == nil:",
		Why: "someone else's deletion reported as ours"},
	{ID: "R10", File: "internal/reap/decide.go", Pkgs: reapPkg,
		Search: "case !apiequality.Semantic.DeepEqual(before.Labels, after.Labels):", Replace: "case false:",
		Why: "a delete retried after a label changed (a hold)"},
	{ID: "R11", File: "internal/reap/evidence.go", Pkgs: reapPkg,
		Search: "if cut := classify.CutTime(s); !cut.Equal(e.Cut) {", Replace: "if cut := classify.CutTime(s); cut.Before(e.Cut) {",
		Why: "a rescue re-dated later since the read still justifies the delete"},
	{ID: "R12", File: "internal/reap/delete.go", Pkgs: reapPkg,
		Search: "if users := x.seen.of(cl.Key()); len(users) > 0 {", Replace: "if users := x.seen.of(cl.Key()); len(users) > 1 {",
		Why: "the retry after a bookkeeping change ignores one pod using the claim"},

	// classify: the states and the evidence that dates an orphan.
	{ID: "C01", File: "internal/classify/life.go", Pkgs: classifyPkg,
		Search: "if age >= c.p.MinAge {", Replace: "if age+time.Second >= c.p.MinAge {",
		Why: "a claim a second younger than --min-age is judged"},
	{ID: "C02", File: "internal/classify/evidence.go", Pkgs: classifyPkg,
		Search: "case c.DeletionTimestamp != nil:", Replace: "case false:",
		Why: "a rescue whose content is being deleted counts as intact"},
	{ID: "C03", File: "internal/classify/evidence.go", Pkgs: classifyPkg,
		Search: "case !c.HasHandle:", Replace: "case false:",
		Why: "a rescue whose content has no snapshotHandle counts as intact"},
	{ID: "C04", File: "internal/classify/evidence.go", Pkgs: classifyPkg,
		Search: "case c.SnapshotUID != s.UID:", Replace: "case false:",
		Why: "a content bound to another snapshot counts"},
	{ID: "C05", File: "internal/classify/classify.go", Pkgs: classifyPkg,
		Search:  "return since != nil && !CutTime(s).Before(since.Add(c.p.ClockSkew))",
		Replace: "return since != nil && !CutTime(s).Before(since.Add(c.p.ClockSkew-time.Second))",
		Why:     "a rescue cut a second inside --clock-skew of orphaned-since counts"},
	{ID: "C06", File: "internal/classify/notice.go", Pkgs: classifyPkg,
		Search:  "if c.p.NoticePeriod <= 0 || !GraceOver(*d.OrphanedSince, c.p.GracePeriod, c.now) {",
		Replace: "if c.p.NoticePeriod <= 0 || !GraceOver(*d.OrphanedSince, c.p.GracePeriod, c.now.Add(time.Second)) {",
		Why:     "the notice begins a second before the grace period ends"},
	{ID: "C07", File: "internal/classify/notice.go", Pkgs: classifyPkg,
		Search: "case until.After(end.Add(max)):", Replace: "case until.After(end.Add(max + time.Second)):",
		Why: "a snooze a second past --max-snooze is not capped"},
	{ID: "C08", File: "internal/classify/notice.go", Pkgs: classifyPkg,
		Search: "end = CeilSecond(c.now.Add(c.p.NoticePeriod))", Replace: "end = c.now.Add(c.p.NoticePeriod).Truncate(time.Second)",
		Why: "the notice's end rounded down, not up"},
	{ID: "C09", File: "internal/classify/evidence.go", Pkgs: classifyPkg,
		Search:  "if s.ManagedByJanitor && s.OrphanedSince != nil && s.OrphanedSince.Before(cut) {",
		Replace: "if s.ManagedByJanitor && s.OrphanedSince != nil && s.OrphanedSince.After(cut) {",
		Why:     "a rescue dated by its cut, not by the orphaned-since it was taken for"},

	// rescue: when a rescue counts, and when a run may try again.
	{ID: "S01", File: "internal/classify/classify.go", Pkgs: rescuePkg,
		Search: "return !ok || !now.Before(next)", Replace: "return !ok || !now.Add(time.Second).Before(next)",
		Why: "a failed rescue tried again a second early"},
	{ID: "S02", File: "internal/rescue/rules.go", Pkgs: rescuePkg,
		Search: "if !cut.Before(orphanedSince.Add(skew)) {", Replace: "if !cut.Add(time.Second).Before(orphanedSince.Add(skew)) {",
		Why: "a cut a second inside --clock-skew trusted as the rescue"},
	{ID: "S03", File: "internal/rescue/rules.go", Pkgs: rescuePkg,
		Search: "return !s.CreationTimestamp.Before(orphanedSince)", Replace: "return !s.CreationTimestamp.Add(time.Second).Before(orphanedSince)",
		Why: "an own snapshot a second older than orphaned-since taken as its rescue"},
	{ID: "S04", File: "internal/rescue/stale.go", Pkgs: rescuePkg,
		Search: "s.OrphanedSince != nil && s.OrphanedSince.Before(since)", Replace: "s.OrphanedSince != nil && !s.OrphanedSince.After(since)",
		Why: "the rescue of the current orphan period labelled stale"},

	// mark: the record of a use.
	{ID: "A01", File: "internal/mark/mark.go", Pkgs: markPkg,
		Search: "err == nil && !t.Before(r.LastUsedValue) {", Replace: "err == nil && t.Before(r.LastUsedValue) {",
		Why: "a later record of a use moved back"},
	{ID: "A02", File: "internal/classify/evidence.go", Pkgs: markPkg,
		Search: "\tif tr.Before(t) {\n\t\ttr = tr.Add(time.Second)", Replace: "\tif false {\n\t\ttr = tr.Add(time.Second)",
		Why: "a use's time rounded down, not up"},

	// One each in the files under rewrite.
	{ID: "T01", File: "internal/retention/retention.go", Pkgs: []string{"./internal/retention/"},
		Search: "if age := now.Sub(cut); age < p.KeepFor {", Replace: "if age := now.Sub(cut); age+time.Second < p.KeepFor {",
		Why: "a rescue pruned a second before --keep-for"},
	{ID: "P01", File: "internal/prune/reread.go", Pkgs: []string{"./internal/prune/"},
		Search: "case vs.DeletionTimestamp != nil:", Replace: "case false:",
		Why: "a rescue someone else is deleting since prune's read is deleted again"},
	{ID: "P02", File: "internal/prune/prune.go", Pkgs: []string{"./internal/prune/"},
		Search: "\tdefer writeUses(ctx, c, ds, o.DryRun)", Replace: "\t_ = writeUses",
		Why: "a use only prune's read saw is not written down (safety row 40.P)"},
	{ID: "E01", File: "internal/restore/plan.go", Pkgs: []string{"./internal/restore/"},
		Search: "\tif r.AllowOlder {\n\t\treturn nil", Replace: "\tif true {\n\t\treturn nil",
		Why: "a restore of older data beside a newer copy not refused"},

	// reap in batches (issue 43, docs/spec.md#reap-batch).
	{ID: "B01", File: "internal/reap/batch.go", Pkgs: reapPkg,
		Search: "n := batchLen(rest, o.batchSize())", Replace: "n := batchLen(rest, len(rest))",
		Why: "one pod list serves every delete of the run: a pod that starts during earlier deletes is missed"},
	{ID: "B02", File: "internal/reap/batch.go", Pkgs: reapPkg,
		Search: "if i > 0 && time.Since(listed) > o.batchMaxAge() {", Replace: "if i > 0 && listed.IsZero() {",
		Why: "a batch's pod list serves deletes however long ago it answered"},
	{ID: "B03", File: "internal/reap/batch.go", Pkgs: reapPkg,
		Search: "if users := seen.of(x.d.Claim.Key()); len(users) > 0 {", Replace: "if users := seen.of(x.d.Claim.Key()); len(users) > 0 && false {",
		Why: "a claim the batch's pod list shows in use is deleted"},
	{ID: "B04", File: "internal/reap/batch.go", Pkgs: reapPkg,
		Search: "return justified(ctx, c, ev, snap)", Replace: "return nil",
		Why: "the batch does not read its rescues again"},

	// A workspace is rescued before any of its claims is reaped (issue 41,
	// docs/spec.md#reap-workspace-first).
	{ID: "W01", File: "internal/classify/siblings.go", Pkgs: classifyPkg,
		Search: "rule.Idle && rule.Snapshot != SnapRescue", Replace: "rule.Idle && o.State == Orphaned",
		Why: "a claim is reaped while another claim of its workspace is in its grace period, being snapshotted or failing"},
	{ID: "W02", File: "internal/classify/siblings.go", Pkgs: classifyPkg,
		Search: "o.Workspace != d.Workspace || o.Claim.Namespace != d.Claim.Namespace ||", Replace: "o.Workspace != d.Workspace ||",
		Why: "a claim waits for an orphan of a workspace of the same name in another namespace"},
	{ID: "W03", File: "internal/reap/reap.go", Pkgs: reapPkg,
		Search: "if why := WorkspaceWaits(p.ds, d); why != \"\" {", Replace: "if why := WorkspaceWaits(p.ds, d); false && why != \"\" {",
		Why: "the reap deletes a rescued claim while another claim of its workspace is not rescued yet"},
	{ID: "S05", File: "internal/rescue/claim.go", Pkgs: rescuePkg,
		Search: "\t\tif source == want {", Replace: "\t\tif source != \"\" {",
		Why: "a snapshot cut from another claim's volume counted as the rescue"},
	{ID: "S06", File: "internal/rescue/snapshot.go", Pkgs: rescuePkg,
		Search: "if err := r.recordIntent(ctx, ns, name, uid); err != nil {", Replace: "if err := error(nil); err != nil {",
		Why: "a failed attempt's content set to Delete with no intent recorded: kept after a kill, it stays Delete"},

	// Found by the chaos oracle's G10 and G3 (issue 40): when a run began,
	// and a write past the Lease's deadline.
	{ID: "N01", File: "internal/janitor/reap.go", Pkgs: guardPkg,
		Search: "func runStart(scan *ScanResult) time.Time { return scan.Start }", Replace: "func runStart(scan *ScanResult) time.Time { return scan.Now }",
		Why: "a notice taken as over for a run whose first read came before its end (the scan's lists ended after it)"},
	{ID: "L01", File: "internal/kube/guard.go", Pkgs: kubePkg,
		Search: "if err := check(); err != nil {", Replace: "if err := check(); err != nil && false {",
		Why: "a write sent after the run's Lease stopped vouching for it"},
	{ID: "L02", File: "internal/lock/lock.go", Pkgs: lockPkg,
		Search: "if Expired(last, time.Now(), l.duration) {", Replace: "if false && Expired(last, time.Now(), l.duration) {",
		Why: "the Lease vouches for a write past its renew deadline until the renewal notices"},
}
