package csidriver

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Fault describes misbehaviour to inject for one source volume. It is stored
// as JSON in <state-dir>/faults/<url.PathEscape(volumeHandle)>.json and read
// on every CreateSnapshot and ListSnapshots, so a test in another process can
// change it while the driver runs. The zero Fault injects nothing.
//
// JSON form: {"readyAfter":"5s","transientFailures":2,
// "transientCode":"Unavailable","permanentError":"...","cutOffset":"-3s"}.
type Fault struct {
	// ReadyAfter keeps snapshots of the volume at ready_to_use=false until
	// this long after they were first created, to exercise the
	// snapshotter's polling of not-yet-ready snapshots.
	ReadyAfter time.Duration
	// TransientFailures makes the first N CreateSnapshot calls for the
	// volume fail with TransientCode, to exercise the snapshotter's retries.
	// The count already served is durable, so a driver restart does not
	// hand out the failures again.
	TransientFailures int
	// TransientCode is a gRPC code name such as "Unavailable",
	// "DeadlineExceeded", "Internal" or "ResourceExhausted" (case and
	// underscores do not matter); empty means "Unavailable".
	TransientCode string
	// PermanentError, when non-empty, makes every CreateSnapshot for the
	// volume fail with InvalidArgument and this message until the fault is
	// cleared, which the snapshotter surfaces as status.error.
	PermanentError string
	// CutOffset moves the creation_time the driver reports for the
	// snapshots it creates from then on: a storage system whose clock is
	// ahead (positive) or behind (negative) the API server's. It is
	// recorded with each snapshot, so it stays across restarts and a later
	// change of the fault.
	CutOffset time.Duration
}

// faultJSON is the on-disk form. Revision is not part of Fault: SetFault
// stamps a fresh one each time so that the durable TransientFailures counter
// restarts for a newly set fault without SetFault having to delete the
// counter file behind the running driver's back.
type faultJSON struct {
	ReadyAfter        string `json:"readyAfter,omitempty"`
	TransientFailures int    `json:"transientFailures,omitempty"`
	TransientCode     string `json:"transientCode,omitempty"`
	PermanentError    string `json:"permanentError,omitempty"`
	CutOffset         string `json:"cutOffset,omitempty"`
	Revision          string `json:"revision,omitempty"`
}

// counterJSON records how many transient failures have been served for the
// fault revision it names.
type counterJSON struct {
	Revision                string `json:"revision"`
	TransientFailuresServed int    `json:"transientFailuresServed"`
}

// MarshalJSON writes ReadyAfter as a Go duration string so that fault files
// stay easy to write by hand (or from a shell script).
func (f Fault) MarshalJSON() ([]byte, error) {
	return json.Marshal(f.toJSON())
}

// UnmarshalJSON reads ReadyAfter as a Go duration string, matching
// MarshalJSON.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	parsed, err := j.fault()
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

func (f Fault) toJSON() faultJSON {
	j := faultJSON{
		TransientFailures: f.TransientFailures,
		TransientCode:     f.TransientCode,
		PermanentError:    f.PermanentError,
	}
	if f.ReadyAfter != 0 {
		j.ReadyAfter = f.ReadyAfter.String()
	}
	if f.CutOffset != 0 {
		j.CutOffset = f.CutOffset.String()
	}
	return j
}

func (j faultJSON) fault() (Fault, error) {
	f := Fault{
		TransientFailures: j.TransientFailures,
		TransientCode:     j.TransientCode,
		PermanentError:    j.PermanentError,
	}
	if j.ReadyAfter != "" {
		d, err := time.ParseDuration(j.ReadyAfter)
		if err != nil {
			return Fault{}, fmt.Errorf("csidriver: fault readyAfter: %w", err)
		}
		f.ReadyAfter = d
	}
	if j.CutOffset != "" {
		d, err := time.ParseDuration(j.CutOffset)
		if err != nil {
			return Fault{}, fmt.Errorf("csidriver: fault cutOffset: %w", err)
		}
		f.CutOffset = d
	}
	return f, nil
}

func (f Fault) validate() error {
	if f.ReadyAfter < 0 {
		return errors.New("csidriver: fault readyAfter must not be negative")
	}
	if f.TransientFailures < 0 {
		return errors.New("csidriver: fault transientFailures must not be negative")
	}
	_, err := f.transientCode()
	return err
}

func (f Fault) transientCode() (codes.Code, error) {
	if f.TransientCode == "" {
		return codes.Unavailable, nil
	}
	want := normalizeCodeName(f.TransientCode)
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if normalizeCodeName(c.String()) == want {
			return c, nil
		}
	}
	return 0, fmt.Errorf("csidriver: fault transientCode %q is not a gRPC error code name", f.TransientCode)
}

// normalizeCodeName lets both Go spellings ("DeadlineExceeded") and proto
// spellings ("DEADLINE_EXCEEDED") name a code.
func normalizeCodeName(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "_", ""))
}

func faultDir(stateDir string) string   { return filepath.Join(stateDir, "faults") }
func counterDir(stateDir string) string { return filepath.Join(stateDir, "fault-counters") }

// faultFileName escapes the handle because CSI volume handles may contain
// slashes and other characters that are not safe in a single path element.
func faultFileName(volumeHandle string) string {
	return url.PathEscape(volumeHandle) + ".json"
}

// SetFault configures the fault for volumeHandle in the driver's state folder.
// It takes effect on the driver's next CreateSnapshot or ListSnapshots, even
// when the driver runs in another process. Each call starts a fresh
// TransientFailures count, even if f equals the current fault.
func SetFault(stateDir, volumeHandle string, f Fault) error {
	if volumeHandle == "" {
		return errors.New("csidriver: empty volume handle")
	}
	if err := f.validate(); err != nil {
		return err
	}
	j := f.toJSON()
	j.Revision = rand.Text()
	if err := writeJSONAtomic(filepath.Join(faultDir(stateDir), faultFileName(volumeHandle)), j); err != nil {
		return fmt.Errorf("csidriver: write fault: %w", err)
	}
	return nil
}

// ClearFault removes the fault for volumeHandle, restoring normal behaviour.
// Clearing a volume that has no fault is not an error.
func ClearFault(stateDir, volumeHandle string) error {
	if volumeHandle == "" {
		return errors.New("csidriver: empty volume handle")
	}
	for _, p := range []string{
		filepath.Join(faultDir(stateDir), faultFileName(volumeHandle)),
		filepath.Join(counterDir(stateDir), faultFileName(volumeHandle)),
	} {
		if err := removeIfExists(p); err != nil {
			return fmt.Errorf("csidriver: clear fault: %w", err)
		}
	}
	return nil
}

// loadFault returns the fault for volumeHandle and its revision; a missing
// file means no fault.
func (d *Driver) loadFault(volumeHandle string) (Fault, string, error) {
	var j faultJSON
	err := readJSON(filepath.Join(faultDir(d.stateDir), faultFileName(volumeHandle)), &j)
	if errors.Is(err, fs.ErrNotExist) {
		return Fault{}, "", nil
	}
	if err != nil {
		return Fault{}, "", err
	}
	f, err := j.fault()
	if err != nil {
		return Fault{}, "", err
	}
	if err := f.validate(); err != nil {
		return Fault{}, "", err
	}
	return f, j.Revision, nil
}

// takeTransientFailure reports whether this CreateSnapshot call must fail
// transiently, and if so records it durably before the caller answers, so
// that a crash right after cannot make the failure be served twice.
func (d *Driver) takeTransientFailure(volumeHandle string, f Fault, revision string) (bool, error) {
	if f.TransientFailures == 0 {
		return false, nil
	}
	path := filepath.Join(counterDir(d.stateDir), faultFileName(volumeHandle))
	var c counterJSON
	if err := readJSON(path, &c); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if c.Revision != revision {
		c = counterJSON{Revision: revision}
	}
	if c.TransientFailuresServed >= f.TransientFailures {
		return false, nil
	}
	c.TransientFailuresServed++
	if err := writeJSONAtomic(path, c); err != nil {
		return false, err
	}
	return true, nil
}
