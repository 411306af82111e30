package endpoint

import (
	"strings"
	"testing"
)

func TestPushgateway(t *testing.T) {
	for _, tc := range []struct {
		raw, base, user, pass, err string
	}{
		{raw: "http://pg:9091", base: "http://pg:9091"},
		{raw: " https://u:secret@pg.example/prefix/ ", base: "https://pg.example/prefix", user: "u", pass: "secret"},
		{raw: "pg:9091", err: "want an http:// or https:// URL with a host"},
		{raw: "https://u:secret@pg?x=1", err: "must not have a query or fragment: https://pg"},
		{raw: "ftp://pg", err: "want an http:// or https://"},
	} {
		base, user, pass, err := Pushgateway(tc.raw)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "secret") {
				t.Errorf("%q: error %v, want one saying %q, without the password", tc.raw, err, tc.err)
			}
		case err != nil || base != tc.base || user != tc.user || pass != tc.pass:
			t.Errorf("%q: %q %q %q %v; want %q %q %q", tc.raw, base, user, pass, err, tc.base, tc.user, tc.pass)
		}
	}
}

func TestValidateWebhook(t *testing.T) {
	for raw, ok := range map[string]bool{"https://hooks.example/x": true, "http://h": true, "hooks.example/x": false, "mailto:a@b": false, "": false} {
		if err := ValidateWebhook(raw); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", raw, err, ok)
		}
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("https://user:secret@pg.example:9091/x?token=secret#frag"); got != "https://pg.example:9091/x" {
		t.Errorf("Redact = %q", got)
	}
	if got := Redact("::"); got != "<invalid URL>" {
		t.Errorf("Redact(::) = %q", got)
	}
}
