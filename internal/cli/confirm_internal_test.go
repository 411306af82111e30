package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
	"github.com/pvc-janitor/pvc-janitor/test/ptytest"
)

// TestConfirmYesAndDryRunNeedNoPrompt: --yes and --dry-run never prompt,
// whatever the input.
func TestConfirmYesAndDryRunNeedNoPrompt(t *testing.T) {
	for _, c := range []struct{ yes, dryRun bool }{{true, false}, {false, true}, {true, true}} {
		confirm, err := confirmer(Streams{In: strings.NewReader(""), ErrOut: &bytes.Buffer{}}, &config.Config{Yes: c.yes, DryRun: c.dryRun}, "reap")
		if err != nil || confirm != nil {
			t.Errorf("yes=%v dryRun=%v: prompt %v, error %v; want neither", c.yes, c.dryRun, confirm != nil, err)
		}
	}
}

// TestConfirmRefusedOffATerminal: without --yes, an input that is not a
// terminal (a reader, a pipe, a regular file) is refused with exit 2 and a
// message naming the command and --yes.
func TestConfirmRefusedOffATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, in := range map[string]interface{ Read([]byte) (int, error) }{
		"strings.Reader": strings.NewReader("yes\n"), "pipe": r, "regular file": file,
	} {
		confirm, err := confirmer(Streams{In: in, ErrOut: &bytes.Buffer{}}, &config.Config{}, "reap")
		if confirm != nil {
			t.Errorf("%s: a prompt was returned off a terminal", name)
		}
		if err == nil || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("%s: error %v (exit %d), want exit %d", name, err, exitcode.Code(err), exitcode.Usage)
			continue
		}
		if !strings.Contains(err.Error(), "reap") || !strings.Contains(err.Error(), "--yes") {
			t.Errorf("%s: message %q names neither the command nor --yes", name, err)
		}
	}
}

// TestConfirmPromptsOnATerminal: on a real pseudo-terminal the prompt asks
// on stderr with the count and deletes only on "yes" (any case, spaces
// around it); anything else, or the end of input, declines.
func TestConfirmPromptsOnATerminal(t *testing.T) {
	for _, c := range []struct {
		name, typed string
		hangUp      bool
		want        bool
	}{
		{"yes", "yes\n", false, true},
		{"YES with spaces", "  YES \n", false, true},
		{"no", "no\n", false, false},
		{"y is not yes", "y\n", false, false},
		{"empty line", "\n", false, false},
		{"end of input", "", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			master, slave := ptytest.Open(t)
			var errOut bytes.Buffer
			confirm, err := confirmer(Streams{In: slave, ErrOut: &errOut}, &config.Config{}, "reap")
			if err != nil || confirm == nil {
				t.Fatalf("on a terminal: prompt %v, error %v; want a prompt", confirm != nil, err)
			}
			if c.typed != "" {
				if _, err := master.Write([]byte(c.typed)); err != nil {
					t.Fatal(err)
				}
			}
			if c.hangUp {
				// End of input: ^D at the start of a line (canonical mode).
				if _, err := master.Write([]byte{4}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := confirm(3)
			if err != nil {
				t.Fatalf("prompt error: %v", err)
			}
			if got != c.want {
				t.Errorf("typed %q: confirmed %v, want %v", c.typed, got, c.want)
			}
			if !strings.Contains(errOut.String(), "Delete 3 rescued claim(s)?") {
				t.Errorf("prompt on stderr: %q", errOut.String())
			}
		})
	}
}

// TestConfirmLogFormatAutoFollowsTheTerminal (docs/spec.md#output): --log-format auto
// writes console lines on a terminal and JSON off one; the same logger, two
// writers.
func TestConfirmLogFormatAutoFollowsTheTerminal(t *testing.T) {
	cfg := &config.Config{LogFormat: config.LogFormatAuto, LogLevel: "info"}
	var buf bytes.Buffer
	log := newLogger(cfg, &buf)
	log.Info().Str("claim", "ws-a").Msg("hello")
	var v map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &v); err != nil || v["message"] != "hello" || v["claim"] != "ws-a" {
		t.Errorf("off a terminal: %q is not the JSON line (%v)", buf.String(), err)
	}

	master, slave := ptytest.Open(t)
	log = newLogger(cfg, slave)
	log.Info().Str("claim", "ws-a").Msg("hello")
	got := make([]byte, 4096)
	n, err := master.Read(got)
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.TrimSpace(got[:n])
	if json.Valid(line) || !bytes.Contains(line, []byte("hello")) || !bytes.Contains(line, []byte("INF")) {
		t.Errorf("on a terminal: %q, want a console line", line)
	}
}

// TestStreamsThatAreNotFilesAreLocked: a buffer given as a stream is
// written under a lock (the workers log concurrently), one lock when it is
// both streams; a file is passed through, so it is still seen as a
// terminal when it is one.
func TestStreamsThatAreNotFilesAreLocked(t *testing.T) {
	var buf bytes.Buffer
	out, errOut := lockWriters(&buf, &buf)
	if _, ok := out.(*syncWriter); !ok || out != errOut {
		t.Errorf("one buffer as both streams: %T, %T; want one syncWriter", out, errOut)
	}
	var other bytes.Buffer
	if out, errOut := lockWriters(&buf, &other); out == errOut {
		t.Error("two buffers share one lock")
	}
	_, slave := ptytest.Open(t)
	if out, _ := lockWriters(slave, slave); out != io.Writer(slave) || !term.IsTerminal(out) {
		t.Errorf("a terminal came back as %T", out)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			for range 100 {
				fmt.Fprintln(out, "a log line")
			}
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if n := strings.Count(buf.String(), "a log line\n"); n != 400 {
		t.Errorf("%d of 400 lines written whole", n)
	}
}
