//go:build integration

package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// KubeVersionEnv picks the Kubernetes version of the local control plane
// (scripts/cluster/versions.sh reads it too): one of the supported minors,
// v1.35.4, v1.36.3 or v1.37.2 (the default).
const KubeVersionEnv = "JANITOR_KUBE_VERSION"

// Minor returns the minor number of a Kubernetes version such as "v1.35.4"
// (0 when it does not parse).
func Minor(version string) int {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 || parts[0] != "1" {
		return 0
	}
	m, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0
	}
	return m
}

// UnusedConditionEnabled reports whether a control plane of this
// Kubernetes version, started with these --feature-gates, maintains the
// Unused condition of claims (KEP-5541, gate PersistentVolumeClaimUnusedSinceTime):
// absent before v1.36; alpha, off unless enabled, in v1.36; beta, on unless
// disabled, from v1.37. The gate's own setting wins over AllAlpha/AllBeta.
// An unparsable version is taken as the newest.
func UnusedConditionEnabled(version, gates string) bool {
	minor := Minor(version)
	if minor != 0 && minor < 36 {
		return false
	}
	all := "AllBeta"
	def := true
	if minor == 36 {
		all, def = "AllAlpha", false
	}
	allSetting := ""
	for _, kv := range strings.Split(gates, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case UnusedSinceGate:
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			return err != nil || b
		case all:
			allSetting = strings.TrimSpace(v)
		}
	}
	if b, err := strconv.ParseBool(allSetting); err == nil {
		return b
	}
	return def
}

func kubeVersionFile(dir string) string { return filepath.Join(dir, "kube-version") }

// RecordedKubeVersion returns the Kubernetes version a cluster folder was
// started with; ok is false when the folder records none.
func RecordedKubeVersion(dir string) (version string, ok bool) {
	return readRecord(kubeVersionFile(dir))
}

// readRecord returns the trimmed content of a cluster folder's record file;
// ok is false when there is none.
func readRecord(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
