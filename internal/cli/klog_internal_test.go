package cli

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestClientGoLinesGoToTheRunLog: a klog line of client-go's (the one a
// connection reset prints) never reaches stderr on its own; it is in the
// run's log at debug level, and nowhere at the default level.
func TestClientGoLinesGoToTheRunLog(t *testing.T) {
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = stderr
	t.Cleanup(func() { os.Stderr = saved })

	for _, c := range []struct {
		level string
		want  bool
	}{{"debug", true}, {"info", false}} {
		var buf bytes.Buffer
		newLogger(&config.Config{LogLevel: c.level, LogFormat: config.LogFormatJSON}, &buf)
		klog.ErrorS(errors.New("read: connection reset by peer"), "Unexpected error when reading response body")
		klog.Flush()
		got := buf.String()
		if in := strings.Contains(got, "Unexpected error when reading response body"); in != c.want {
			t.Errorf("--log-level %s: the run's log %q; want the klog line in it: %v", c.level, got, c.want)
		}
		if c.want && (!strings.Contains(got, `"level":"debug"`) || !strings.Contains(got, "connection reset by peer")) {
			t.Errorf("--log-level %s: %q, want it at debug level with its error", c.level, got)
		}
	}
	os.Stderr = saved
	b, err := os.ReadFile(stderr.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 0 {
		t.Errorf("klog wrote to stderr: %q", b)
	}
}
