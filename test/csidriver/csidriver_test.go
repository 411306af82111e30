package csidriver

import (
	"bytes"
	"context"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// harness is a driver serving over a real unix socket, as csi-snapshotter
// would see it.
type harness struct {
	t        *testing.T
	stateDir string
	logs     *bytes.Buffer // read only after stop: the server writes to it
	id       csi.IdentityClient
	ctl      csi.ControllerClient
	node     csi.NodeClient
	stop     func()
}

// socketDir returns a folder short enough for a unix socket path (about 108
// bytes), because t.TempDir() can be long under some TMPDIR settings.
func socketDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if len(filepath.Join(dir, "csi.sock")) < 100 {
		return dir
	}
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func start(t *testing.T, stateDir string) *harness {
	t.Helper()
	logs := &bytes.Buffer{}
	d, err := New(Options{DriverName: "test.csi.example", StateDir: stateDir, Logger: log.New(logs, "", 0)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	sock := filepath.Join(socketDir(t), "csi.sock")
	lis, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.ServeListener(ctx, lis) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	h := &harness{t: t, stateDir: stateDir, logs: logs, id: csi.NewIdentityClient(conn), ctl: csi.NewControllerClient(conn), node: csi.NewNodeClient(conn)}
	stopped := false
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("ServeListener: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Error("ServeListener did not return after cancel")
		}
	}
	t.Cleanup(h.stop)
	return h
}

func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) create(name, source string) (*csi.Snapshot, error) {
	resp, err := h.ctl.CreateSnapshot(rpcCtx(h.t), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
	return resp.GetSnapshot(), err
}

func (h *harness) mustCreate(name, source string) *csi.Snapshot {
	h.t.Helper()
	s, err := h.create(name, source)
	if err != nil {
		h.t.Fatalf("CreateSnapshot(%q, %q): %v", name, source, err)
	}
	return s
}

func (h *harness) list(req *csi.ListSnapshotsRequest) *csi.ListSnapshotsResponse {
	h.t.Helper()
	resp, err := h.ctl.ListSnapshots(rpcCtx(h.t), req)
	if err != nil {
		h.t.Fatalf("ListSnapshots(%v): %v", req, err)
	}
	return resp
}

func (h *harness) listOne(id string) *csi.Snapshot {
	h.t.Helper()
	resp := h.list(&csi.ListSnapshotsRequest{SnapshotId: id})
	if len(resp.Entries) != 1 {
		h.t.Fatalf("ListSnapshots(id=%s) returned %d entries, want 1", id, len(resp.Entries))
	}
	return resp.Entries[0].GetSnapshot()
}

func wantCode(t *testing.T, err error, code codes.Code) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("got error %v, want code %s", err, code)
	}
	return st
}

func TestIdentityAndCapabilities(t *testing.T) {
	h := start(t, t.TempDir())
	ctx := rpcCtx(t)

	info, err := h.id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetName() != "test.csi.example" || info.GetVendorVersion() != "v0.1.0" {
		t.Errorf("GetPluginInfo = %q %q", info.GetName(), info.GetVendorVersion())
	}

	pc, err := h.id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Capabilities) != 1 || pc.Capabilities[0].GetService().GetType() != csi.PluginCapability_Service_CONTROLLER_SERVICE {
		t.Errorf("GetPluginCapabilities = %v", pc.Capabilities)
	}

	probe, err := h.id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !probe.GetReady().GetValue() {
		t.Error("Probe not ready")
	}

	cc, err := h.ctl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.ControllerServiceCapability_RPC_Type
	for _, c := range cc.Capabilities {
		got = append(got, c.GetRpc().GetType())
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if len(got) != 3 || got[0] != csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME ||
		got[1] != csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT || got[2] != csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS {
		t.Errorf("ControllerGetCapabilities = %v", got)
	}

	// What is not advertised is not served.
	_, err = h.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n"})
	wantCode(t, err, codes.Unimplemented)
}

func TestCreateIdempotentAndAlreadyExists(t *testing.T) {
	h := start(t, t.TempDir())

	first := h.mustCreate("snapshot-1", "vol-a")
	if first.GetSnapshotId() != SnapshotID("snapshot-1") {
		t.Errorf("id = %q, want %q", first.GetSnapshotId(), SnapshotID("snapshot-1"))
	}
	if first.GetSourceVolumeId() != "vol-a" || !first.GetReadyToUse() || first.GetCreationTime() == nil {
		t.Errorf("unexpected snapshot %v", first)
	}

	again := h.mustCreate("snapshot-1", "vol-a")
	if again.GetSnapshotId() != first.GetSnapshotId() || !again.GetCreationTime().AsTime().Equal(first.GetCreationTime().AsTime()) {
		t.Errorf("retry returned %v, want same as %v", again, first)
	}

	other := h.mustCreate("snapshot-2", "vol-a")
	if other.GetSnapshotId() == first.GetSnapshotId() {
		t.Error("different names produced the same id")
	}

	_, err := h.create("snapshot-1", "vol-b")
	wantCode(t, err, codes.AlreadyExists)

	_, err = h.create("", "vol-a")
	wantCode(t, err, codes.InvalidArgument)
	_, err = h.create("snapshot-3", "")
	wantCode(t, err, codes.InvalidArgument)
}

func TestDeleteIdempotent(t *testing.T) {
	h := start(t, t.TempDir())
	snap := h.mustCreate("snapshot-1", "vol-a")
	ctx := rpcCtx(t)

	for i := range 2 {
		if _, err := h.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()}); err != nil {
			t.Fatalf("DeleteSnapshot #%d: %v", i+1, err)
		}
	}
	if _, err := h.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap-unknown"}); err != nil {
		t.Fatalf("DeleteSnapshot(unknown): %v", err)
	}
	if n := len(h.list(&csi.ListSnapshotsRequest{SnapshotId: snap.GetSnapshotId()}).Entries); n != 0 {
		t.Errorf("deleted snapshot still listed (%d entries)", n)
	}
	if _, err := os.Stat(filepath.Join(h.stateDir, "snapshots", snap.GetSnapshotId()+".json")); !os.IsNotExist(err) {
		t.Errorf("snapshot record still on disk: %v", err)
	}
	// The name is free again, even for another source volume.
	if s := h.mustCreate("snapshot-1", "vol-b"); s.GetSourceVolumeId() != "vol-b" {
		t.Errorf("recreated snapshot has source %q", s.GetSourceVolumeId())
	}
}

func TestListFiltersAndPagination(t *testing.T) {
	h := start(t, t.TempDir())
	want := map[string]bool{}
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
		want[h.mustCreate(n, "vol-a").GetSnapshotId()] = true
	}
	b := h.mustCreate("b1", "vol-b")

	if s := h.listOne(b.GetSnapshotId()); s.GetSourceVolumeId() != "vol-b" {
		t.Errorf("list by id returned %v", s)
	}
	if n := len(h.list(&csi.ListSnapshotsRequest{SnapshotId: "snap-missing"}).Entries); n != 0 {
		t.Errorf("list by unknown id returned %d entries", n)
	}
	if n := len(h.list(&csi.ListSnapshotsRequest{SnapshotId: b.GetSnapshotId(), SourceVolumeId: "vol-a"}).Entries); n != 0 {
		t.Errorf("list by id with mismatching source returned %d entries", n)
	}
	if n := len(h.list(&csi.ListSnapshotsRequest{}).Entries); n != 6 {
		t.Errorf("list all returned %d entries, want 6", n)
	}

	got := map[string]bool{}
	token, pages := "", 0
	for {
		resp := h.list(&csi.ListSnapshotsRequest{SourceVolumeId: "vol-a", MaxEntries: 2, StartingToken: token})
		pages++
		if len(resp.Entries) > 2 {
			t.Fatalf("page has %d entries, max 2", len(resp.Entries))
		}
		for _, e := range resp.Entries {
			id := e.GetSnapshot().GetSnapshotId()
			if got[id] {
				t.Errorf("%s listed twice", id)
			}
			if e.GetSnapshot().GetSourceVolumeId() != "vol-a" {
				t.Errorf("filter by source returned %v", e.GetSnapshot())
			}
			got[id] = true
		}
		if resp.NextToken == "" {
			break
		}
		token = resp.NextToken
	}
	if pages != 3 || len(got) != len(want) {
		t.Errorf("paged %d times over %d snapshots, want 3 pages over %d", pages, len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s missing from pages", id)
		}
	}

	for _, tok := range []string{"bogus", "-1", "99"} {
		_, err := h.ctl.ListSnapshots(rpcCtx(t), &csi.ListSnapshotsRequest{StartingToken: tok})
		wantCode(t, err, codes.Aborted)
	}
}

func TestReadyAfter(t *testing.T) {
	h := start(t, t.TempDir())
	const readyAfter = 300 * time.Millisecond
	if err := SetFault(h.stateDir, "vol/slow", Fault{ReadyAfter: readyAfter}); err != nil {
		t.Fatal(err)
	}

	snap := h.mustCreate("snapshot-slow", "vol/slow")
	if snap.GetReadyToUse() {
		t.Fatal("snapshot ready immediately despite ReadyAfter")
	}
	created := snap.GetCreationTime().AsTime()
	if h.listOne(snap.GetSnapshotId()).GetReadyToUse() {
		t.Fatal("ListSnapshots reports ready before ReadyAfter")
	}
	if h.mustCreate("snapshot-slow", "vol/slow").GetReadyToUse() {
		t.Fatal("CreateSnapshot retry reports ready before ReadyAfter")
	}
	// Other volumes are unaffected.
	if !h.mustCreate("snapshot-fast", "vol-fast").GetReadyToUse() {
		t.Error("snapshot of a volume without fault is not ready")
	}

	deadline := time.Now().Add(3 * time.Second)
	for !h.listOne(snap.GetSnapshotId()).GetReadyToUse() {
		if time.Now().After(deadline) {
			t.Fatal("snapshot never became ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if elapsed := time.Since(created); elapsed < readyAfter {
		t.Errorf("ready after %s, want at least %s", elapsed, readyAfter)
	}
	if !h.mustCreate("snapshot-slow", "vol/slow").GetReadyToUse() {
		t.Error("CreateSnapshot retry not ready after ReadyAfter")
	}

	// Readiness is one-way: a longer fault set later must not take it back.
	if err := SetFault(h.stateDir, "vol/slow", Fault{ReadyAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if !h.listOne(snap.GetSnapshotId()).GetReadyToUse() {
		t.Error("ready snapshot became not ready again")
	}

	// Clearing a long ReadyAfter releases a pending snapshot at once.
	pending := h.mustCreate("snapshot-held", "vol/slow")
	if pending.GetReadyToUse() {
		t.Fatal("snapshot ready despite one-hour ReadyAfter")
	}
	if err := ClearFault(h.stateDir, "vol/slow"); err != nil {
		t.Fatal(err)
	}
	if !h.listOne(pending.GetSnapshotId()).GetReadyToUse() {
		t.Error("snapshot not ready after ClearFault")
	}
}

func TestTransientFailuresSurviveRestart(t *testing.T) {
	stateDir := t.TempDir()
	if err := SetFault(stateDir, "vol-flaky", Fault{TransientFailures: 3, TransientCode: "DeadlineExceeded"}); err != nil {
		t.Fatal(err)
	}
	if err := SetFault(stateDir, "vol-default-code", Fault{TransientFailures: 1}); err != nil {
		t.Fatal(err)
	}

	h := start(t, stateDir)
	for i := range 2 {
		_, err := h.create("snapshot-flaky", "vol-flaky")
		if st := wantCode(t, err, codes.DeadlineExceeded); st.Message() == "" {
			t.Errorf("failure #%d has no message", i+1)
		}
	}
	_, err := h.create("snapshot-default", "vol-default-code")
	wantCode(t, err, codes.Unavailable)
	h.stop()

	h = start(t, stateDir)
	_, err = h.create("snapshot-flaky", "vol-flaky")
	wantCode(t, err, codes.DeadlineExceeded)
	for range 2 {
		if !h.mustCreate("snapshot-flaky", "vol-flaky").GetReadyToUse() {
			t.Error("snapshot not ready after transient failures")
		}
	}
	h.mustCreate("snapshot-default", "vol-default-code")

	// Setting the fault again starts a fresh count.
	if err := SetFault(stateDir, "vol-flaky", Fault{TransientFailures: 1, TransientCode: "RESOURCE_EXHAUSTED"}); err != nil {
		t.Fatal(err)
	}
	_, err = h.create("snapshot-flaky", "vol-flaky")
	wantCode(t, err, codes.ResourceExhausted)
	h.mustCreate("snapshot-flaky", "vol-flaky")
}

func TestPermanentError(t *testing.T) {
	h := start(t, t.TempDir())
	const msg = "volume is on fire"
	if err := SetFault(h.stateDir, "vol-broken", Fault{PermanentError: msg, TransientFailures: 1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := h.create("snapshot-broken", "vol-broken")
		if st := wantCode(t, err, codes.InvalidArgument); st.Message() != msg {
			t.Fatalf("message = %q, want %q", st.Message(), msg)
		}
	}
	if n := len(h.list(&csi.ListSnapshotsRequest{SourceVolumeId: "vol-broken"}).Entries); n != 0 {
		t.Errorf("failed creation left %d snapshots", n)
	}
	if err := ClearFault(h.stateDir, "vol-broken"); err != nil {
		t.Fatal(err)
	}
	if err := ClearFault(h.stateDir, "vol-broken"); err != nil {
		t.Errorf("second ClearFault: %v", err)
	}
	if s := h.mustCreate("snapshot-broken", "vol-broken"); !s.GetReadyToUse() {
		t.Error("snapshot not ready after clearing the fault")
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	stateDir := t.TempDir()
	h := start(t, stateDir)
	snap := h.mustCreate("snapshot-durable", "vol-a")
	gone := h.mustCreate("snapshot-gone", "vol-a")
	if _, err := h.ctl.DeleteSnapshot(rpcCtx(t), &csi.DeleteSnapshotRequest{SnapshotId: gone.GetSnapshotId()}); err != nil {
		t.Fatal(err)
	}
	h.stop()

	h = start(t, stateDir)
	got := h.listOne(snap.GetSnapshotId())
	if got.GetSourceVolumeId() != "vol-a" || !got.GetReadyToUse() ||
		!got.GetCreationTime().AsTime().Equal(snap.GetCreationTime().AsTime()) {
		t.Errorf("after restart got %v, want %v", got, snap)
	}
	if n := len(h.list(&csi.ListSnapshotsRequest{}).Entries); n != 1 {
		t.Errorf("after restart %d snapshots listed, want 1", n)
	}
	again := h.mustCreate("snapshot-durable", "vol-a")
	if !again.GetCreationTime().AsTime().Equal(snap.GetCreationTime().AsTime()) {
		t.Errorf("creation time changed across restart: %v -> %v", snap.GetCreationTime().AsTime(), again.GetCreationTime().AsTime())
	}
	_, err := h.create("snapshot-durable", "vol-b")
	wantCode(t, err, codes.AlreadyExists)
}

func TestFaultJSONAndValidation(t *testing.T) {
	stateDir := t.TempDir()
	if err := SetFault(stateDir, "pvc/ns:x", Fault{ReadyAfter: 5 * time.Second, TransientCode: "Internal"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "faults", "pvc%2Fns:x.json"))
	if err != nil {
		t.Fatalf("fault file not at the documented path: %v", err)
	}
	var f Fault
	if err := f.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if f.ReadyAfter != 5*time.Second || f.TransientCode != "Internal" {
		t.Errorf("round trip gave %+v", f)
	}
	if err := SetFault(stateDir, "v", Fault{TransientCode: "NotACode"}); err == nil {
		t.Error("SetFault accepted an unknown code")
	}
	if err := SetFault(stateDir, "v", Fault{ReadyAfter: -time.Second}); err == nil {
		t.Error("SetFault accepted a negative ReadyAfter")
	}
}

func TestListenRemovesStaleSocketAndRejectsOtherFiles(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "sub", "csi.sock")
	for i := range 2 {
		lis, err := Listen(sock)
		if err != nil {
			t.Fatalf("Listen #%d: %v", i+1, err)
		}
		// Leave the socket file behind as a killed driver would.
		if ul, ok := lis.(interface{ SetUnlinkOnClose(bool) }); ok {
			ul.SetUnlinkOnClose(false)
		}
		lis.Close()
		if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("stale socket not left behind: %v", err)
		}
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + plain); err == nil {
		t.Error("Listen replaced a regular file")
	}
	if _, err := Listen("tcp://127.0.0.1:0"); err == nil {
		t.Error("Listen accepted a tcp endpoint")
	}
}

func TestLogsOneLinePerRPC(t *testing.T) {
	h := start(t, t.TempDir())
	h.mustCreate("snapshot-1", "vol-a")
	_, err := h.create("snapshot-1", "vol-b")
	wantCode(t, err, codes.AlreadyExists)
	h.stop()

	lines := strings.Split(strings.TrimSpace(h.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines, want 2:\n%s", len(lines), h.logs)
	}
	for i, want := range []string{"CreateSnapshot name=\"snapshot-1\" source=\"vol-a\" code=OK", "code=AlreadyExists"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("log line %q does not contain %q", lines[i], want)
		}
	}
}

// TestCutOffset: a storage clock behind (or ahead of) the API server's is
// modelled by the fault's CutOffset: the creation_time of the snapshots
// created under it moves by the offset, durably, and later snapshots are
// not moved once the fault is cleared.
func TestCutOffset(t *testing.T) {
	stateDir := t.TempDir()
	h := start(t, stateDir)
	if err := SetFault(stateDir, "vol-a", Fault{CutOffset: -time.Hour}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	s := h.mustCreate("snapshot-behind", "vol-a")
	cut := s.GetCreationTime().AsTime()
	if d := before.Sub(cut); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("creation_time %s is not an hour behind %s", cut, before)
	}
	if err := ClearFault(stateDir, "vol-a"); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h = start(t, stateDir)
	if got := h.listOne(s.GetSnapshotId()).GetCreationTime().AsTime(); !got.Equal(cut) {
		t.Errorf("after a restart and the fault cleared, creation_time %s, want %s", got, cut)
	}
	if got := h.mustCreate("snapshot-now", "vol-a").GetCreationTime().AsTime(); got.Before(before) {
		t.Errorf("a snapshot taken without the fault is cut at %s, before %s", got, before)
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "faults", "vol-a.json"))
	if err == nil {
		t.Errorf("fault file left after ClearFault: %s", b)
	}
	var f Fault
	if err := f.UnmarshalJSON([]byte(`{"cutOffset":"-3s"}`)); err != nil || f.CutOffset != -3*time.Second {
		t.Errorf("cutOffset JSON: %+v, %v", f, err)
	}
}
