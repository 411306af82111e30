// Package endpoint parses the URLs the janitor publishes a report to: the
// Pushgateway (--pushgateway) and the webhook (--notify-webhook). It is a
// leaf, so that config can check them without importing what pushes.
package endpoint

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Pushgateway splits a --pushgateway value into the URL without credentials
// (and without a trailing slash) and the credentials: an absolute http or
// https URL with a host and no query or fragment. The error never contains
// the credentials.
func Pushgateway(raw string) (base, user, pass string, err error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", "", "", fmt.Errorf("--pushgateway: invalid URL %s", Redact(raw))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", "", fmt.Errorf("--pushgateway: want an http:// or https:// URL with a host, got %s", Redact(raw))
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", "", "", fmt.Errorf("--pushgateway: the URL must not have a query or fragment: %s", Redact(raw))
	}
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
		u.User = nil
	}
	return strings.TrimSuffix(u.String(), "/"), user, pass, nil
}

// ValidatePushgateway checks a --pushgateway value (Pushgateway).
func ValidatePushgateway(raw string) error {
	_, _, _, err := Pushgateway(raw)
	return err
}

// ValidateWebhook checks a --notify-webhook value: an http(s) URL with a
// host.
func ValidateWebhook(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("must be an http(s) URL with a host")
	}
	return nil
}

// Redact returns the URL without its credentials, query and fragment, for
// logs and messages; an unparsable URL becomes "<invalid URL>".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<invalid URL>"
	}
	u.User = nil
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return u.String()
}
