package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/notify/message"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// quiet are actions that change nothing an owner needs to hear of.
var quiet = map[string]bool{"": true, "snapshot-skipped": true, "reap-skipped": true, "snapshot-ready": true}

// Messages groups the claims each route matches by owner (ownerLabel's
// value, else the namespace) and keeps, per owner, the claims this run
// acted on (marked, rescued, deleted, failed…): an owner whose claims saw
// nothing new gets no message. Routes and owners come in a stable order.
func Messages(r *report.Report, routes []config.Route, ownerLabel string) []message.Message {
	var out []message.Message
	for i := range routes {
		rt := &routes[i]
		byOwner := map[string][]message.Claim{}
		for _, e := range r.Claims {
			if !news(e) || !matches(rt, e) {
				continue
			}
			owner := e.Labels[ownerLabel]
			if ownerLabel == "" || owner == "" {
				owner = e.Namespace
			}
			byOwner[owner] = append(byOwner[owner], messageClaim(e))
		}
		owners := make([]string, 0, len(byOwner))
		for o := range byOwner {
			owners = append(owners, o)
		}
		sort.Strings(owners)
		for _, o := range owners {
			out = append(out, message.Message{Route: rt.Name, Owner: o, Cluster: r.Cluster, Command: r.Command, DryRun: r.DryRun, Claims: byOwner[o]})
		}
	}
	return out
}

// news reports whether a claim's entry is news to its owner: an action of
// this run that is not a skip, and for a mark only one of an orphan
// (classify.StateRules' Orphan: idle or superseded; a mark removed because
// the claim is in use again is not worth a message).
func news(e *report.ClaimEntry) bool {
	if quiet[e.Action] {
		return false
	}
	return e.Action != "marked" || classify.RuleFor(classify.State(e.State)).Orphan
}

func matches(rt *config.Route, e *report.ClaimEntry) bool {
	if len(rt.Namespaces) > 0 && !slices.Contains(rt.Namespaces, e.Namespace) {
		return false
	}
	return rt.Sel == nil || rt.Sel.Empty() || rt.Sel.Matches(labels.Set(e.Labels))
}

func messageClaim(e *report.ClaimEntry) message.Claim {
	c := message.Claim{Namespace: e.Namespace, Name: e.Name, State: e.State, Action: e.Action, Reason: e.Reason,
		ReapAfter: e.ReapAfter, Capacity: e.Capacity}
	if e.Snapshot != nil {
		c.Snapshot = e.Snapshot.Name
	}
	return c
}

// Body renders a message in its route's format: Slack's {"text"}, a Teams
// MessageCard, the message as JSON, or the route's template.
func Body(rt *config.Route, m message.Message) ([]byte, error) {
	switch rt.Format {
	case config.FormatJSON:
		return json.Marshal(m)
	case config.FormatTemplate:
		var b bytes.Buffer
		if err := rt.Tmpl.Execute(&b, message.Data(m)); err != nil {
			return nil, fmt.Errorf("route %q: %w", rt.Name, err)
		}
		return b.Bytes(), nil
	case config.FormatTeams:
		return json.Marshal(map[string]any{"@type": "MessageCard", "@context": "https://schema.org/extensions",
			"summary": headline(m), "title": headline(m), "text": strings.ReplaceAll(lines(m), "\n", "<br>")})
	}
	return json.Marshal(map[string]string{"text": "*" + headline(m) + "*\n" + lines(m)})
}

func headline(m message.Message) string {
	h := fmt.Sprintf("pvc-janitor %s on %s: %d of %s's claims", m.Command, m.Cluster, len(m.Claims), m.Owner)
	if m.DryRun {
		h += " (dry run)"
	}
	return h
}

// lines is one line per claim: what happened and what happens when.
func lines(m message.Message) string {
	var b strings.Builder
	for i, c := range m.Claims {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s/%s: %s, %s", c.Namespace, c.Name, c.State, c.Action)
		if c.ReapAfter != nil {
			fmt.Fprintf(&b, "; not deleted before %s", c.ReapAfter.UTC().Format(time.RFC3339))
		}
		if c.Reason != "" {
			b.WriteString(" (" + c.Reason + ")")
		}
	}
	return b.String()
}

// SendRoutes posts each message to its route's webhook, retrying a failed
// post by the one policy of a run's posts (retry.Outbound; a 4xx other
// than 408, 425 and 429 not retried), all of it within budget (0: one try
// each). It returns the failures joined, each
// naming its route and owner, never a URL: a failed notification changes
// nothing the run did.
func SendRoutes(ctx context.Context, client *http.Client, routes []config.Route, msgs []message.Message, budget time.Duration) error {
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	deadline := time.Now().Add(budget)
	byName := map[string]*config.Route{}
	for i := range routes {
		byName[routes[i].Name] = &routes[i]
	}
	var errs []error
	for _, m := range msgs {
		rt := byName[m.Route]
		body, err := Body(rt, m)
		if err == nil {
			err = retryPost(ctx, client, rt.Webhook, body, time.Until(deadline), "the route's webhook")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("route %q, owner %q: %w", m.Route, m.Owner, err))
		}
	}
	return errors.Join(errs...)
}

// retryPost posts body by the one retry policy of a run's posts
// (retry.Outbound): a 4xx other than 408, 425 and 429 is not tried again.
func retryPost(ctx context.Context, client *http.Client, url string, body []byte, left time.Duration, what string) error {
	return retry.Outbound(left).Do(ctx, func(ctx context.Context) error {
		code, err := post(ctx, client, url, body)
		if err == nil && code/100 != 2 {
			err = fmt.Errorf("post to %s: HTTP %d", what, code)
			if !retry.TransientStatus(code) {
				return retry.Permanent(err)
			}
		}
		return err
	})
}
