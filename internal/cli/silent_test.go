package cli_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestSilentServerFailsWithinRequestTimeout (docs/spec.md#run-unreachable):
// with an API server address that accepts connections and never answers
// (a listener on loopback that reads nothing and writes nothing), a scan
// fails within --request-timeout with exit 1 and one line naming the server
// and the flag, not after --api-timeout (2m, the default).
func TestSilentServerFailsWithinRequestTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	server := "https://" + l.Addr().String()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["x"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["x"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "x", AuthInfo: "x"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, stderr := runBare(t, []string{"scan", "-n", "x", "--dry-run", "--request-timeout", "1s", "--kubeconfig", path})
	took := time.Since(start)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, server) || !strings.Contains(stderr, "--request-timeout 1s") {
		t.Fatalf("exit %d, stderr %q; want 1 and one line naming %s and --request-timeout", code, stderr, server)
	}
	if took > 4*time.Second {
		t.Errorf("failed after %s, want within the 1s request timeout (and some slack)", took.Round(time.Millisecond))
	}
	t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
}
