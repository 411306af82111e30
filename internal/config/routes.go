package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/endpoint"
	"github.com/pvc-janitor/pvc-janitor/internal/msgtmpl"
	"github.com/pvc-janitor/pvc-janitor/internal/notify/message"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// KeyNotifyRoutes is the config file key of the notification routes: a list
// of mappings, not a flag (docs/usage.md#notification-routes).
const KeyNotifyRoutes = "notify-routes"

// Route formats: a Slack or Microsoft Teams message, the message as JSON,
// or the route's own template (internal/msgtmpl: Go's {{ }} syntax).
const (
	FormatSlack    = "slack"
	FormatTeams    = "teams"
	FormatJSON     = "json"
	FormatTemplate = "template"
)

// Route sends each owner of the claims it matches one message per run.
// A claim matches when it is in one of Namespaces (any namespace when
// empty) and Selector matches its labels (every claim when empty).
type Route struct {
	Name       string   `yaml:"name"`
	Namespaces []string `yaml:"namespaces"`
	Selector   string   `yaml:"selector"`
	// WebhookEnv names the environment variable holding the webhook's URL
	// (a Secret's key in the chart): never a cluster object an owner could
	// edit, never the config file itself.
	WebhookEnv string `yaml:"webhook-env"`
	Format     string `yaml:"format"`
	Template   string `yaml:"template"`

	// Parsed by loadRoutes: the selector, the template and the URL.
	Sel     labels.Selector   `yaml:"-"`
	Tmpl    *msgtmpl.Template `yaml:"-"`
	Webhook string            `yaml:"-"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeRoutes decodes the config file's notify-routes value (strictly:
// an unknown field is an error).
func decodeRoutes(path string, raw any) ([]Route, error) {
	b, err := yaml.Marshal(raw)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var routes []Route
	if err := dec.Decode(&routes); err != nil {
		return nil, &Error{Flag: KeyNotifyRoutes, Err: fmt.Errorf("config file %s: %s: want a list of routes (name, namespaces, selector, webhook-env, format, template): %s", path, KeyNotifyRoutes, term.OneLine(err.Error()))}
	}
	return routes, nil
}

// loadRoutes checks each route and completes it: its selector and template
// parsed, its webhook read from the environment (a route whose variable is
// unset or empty is refused: a notification must not be lost silently).
func loadRoutes(routes []Route, lookupEnv func(string) (string, bool)) error {
	seen := map[string]bool{}
	for i := range routes {
		r := &routes[i]
		fail := func(format string, a ...any) error {
			return &Error{Flag: KeyNotifyRoutes, Err: fmt.Errorf("%s: route %q: %s", KeyNotifyRoutes, r.Name, fmt.Sprintf(format, a...))}
		}
		switch {
		case r.Name == "":
			return &Error{Flag: KeyNotifyRoutes, Err: fmt.Errorf("%s: route %d has no name", KeyNotifyRoutes, i+1)}
		case seen[r.Name]:
			return fail("a second route of that name")
		case !envName.MatchString(r.WebhookEnv):
			return fail("webhook-env %q is not an environment variable name", r.WebhookEnv)
		}
		seen[r.Name] = true
		for _, ns := range r.Namespaces {
			if errs := content.IsDNS1123Label(ns); len(errs) > 0 {
				return fail("invalid namespace %q", ns)
			}
		}
		var err error
		if r.Sel, err = labels.Parse(r.Selector); err != nil {
			return fail("selector: %v", err)
		}
		if r.Tmpl, err = routeTemplate(r); err != nil {
			return fail("%v", err)
		}
		url, ok := lookupEnv(r.WebhookEnv)
		if !ok || url == "" {
			return fail("environment variable %s (the webhook's URL) is not set", r.WebhookEnv)
		}
		if err := endpoint.ValidateWebhook(url); err != nil {
			return fail("%s: %v", r.WebhookEnv, err)
		}
		r.Webhook = url
	}
	return nil
}

// routeTemplate parses a route's template, checked against the fields of
// notify's message (message.Schema): required with the template format,
// refused with any other.
func routeTemplate(r *Route) (*msgtmpl.Template, error) {
	switch r.Format {
	case "", FormatSlack, FormatTeams, FormatJSON:
		if r.Template != "" {
			return nil, errors.New("a template needs format: template")
		}
		if r.Format == "" {
			r.Format = FormatSlack
		}
		return nil, nil
	case FormatTemplate:
		if r.Template == "" {
			return nil, errors.New("format template needs a template")
		}
		return msgtmpl.Parse(r.Name, r.Template, message.Schema)
	}
	return nil, fmt.Errorf("format %q: want slack, teams, json or template", r.Format)
}

// LabelKeys are the claim labels notifications need: the owner label and
// every key a route's selector names.
func (c *Config) LabelKeys() []string {
	var keys []string
	if c.OwnerLabel != "" {
		keys = append(keys, c.OwnerLabel)
	}
	for _, r := range c.NotifyRoutes {
		if r.Sel == nil {
			continue
		}
		reqs, _ := r.Sel.Requirements()
		for _, q := range reqs {
			keys = append(keys, q.Key())
		}
	}
	return keys
}
