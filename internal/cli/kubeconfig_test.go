package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
)

// Kubeconfig failures need no cluster: they run in make unit too.

// runBare runs a command line with only the given flags (JSON logs added)
// and an empty environment.
func runBare(t *testing.T, args []string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := cli.Run(context.Background(), append(args, "--log-format", "json", "--log-level", "error"),
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
			LookupEnv: func(string) (string, bool) { return "", false }})
	return code, out.String(), errOut.String()
}

func TestUnreachableServerIsRuntimeError(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["x"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.AuthInfos["x"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "x", AuthInfo: "x"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runBare(t, []string{"scan", "-n", "x", "--api-timeout", "2s", "--kubeconfig", path})
	if code != 1 || !strings.Contains(stderr, "connection refused") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stderr, `"t"`) {
		t.Error("the token leaked into the error")
	}
}

func TestMissingKubeconfigIsUsageError(t *testing.T) {
	code, _, stderr := runBare(t, []string{"scan", "-n", "x", "--kubeconfig", filepath.Join(t.TempDir(), "nope")})
	if code != 2 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	broken := filepath.Join(t.TempDir(), "broken")
	_ = os.WriteFile(broken, []byte("{not yaml"), 0o600)
	code, _, stderr = runBare(t, []string{"scan", "-n", "x", "--kubeconfig", broken})
	if code != 2 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("broken kubeconfig: exit %d, stderr %q", code, stderr)
	}
}
