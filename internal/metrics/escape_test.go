package metrics_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/metrics"
)

// TestLastSuccessSurvivesEscapedClusterNames: a failed run keeps the last
// success time read back from the file, for a cluster (a kubeconfig
// context) whose name holds what the text format escapes (", \): the file
// is read back with the writer's escaping, not the raw name.
func TestLastSuccessSurvivesEscapedClusterNames(t *testing.T) {
	for _, name := range []string{`arn:aws:eks:eu-west-1:1:cluster/"prod"`, `C:\clusters\west`, "plain"} {
		path := filepath.Join(t.TempDir(), "pvc-janitor.prom")
		r := sampleRun()
		r.Cluster = name
		if err := metrics.WriteFile(path, r); err != nil {
			t.Fatal(err)
		}
		r.Success, r.Finished = false, finished.Add(time.Hour)
		if err := metrics.WriteFile(path, r); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if !strings.Contains(string(data), "pvc_janitor_last_success_timestamp_seconds{cluster=") ||
			!strings.Contains(string(data), `} 1.767323045e+09`+"\n") {
			t.Errorf("cluster %q: the failed run dropped last_success:\n%s", name, data)
		}
	}
}
