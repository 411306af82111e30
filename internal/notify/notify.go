// Package notify posts a Slack-compatible summary of a run to a webhook
// (--notify-webhook) when the run acted or failed. Webhook URLs are secrets
// (whoever has one can post to the channel): they never appear in errors or
// logs.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/endpoint"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// Validate checks a webhook URL without ever echoing it.
func Validate(raw string) error { return endpoint.ValidateWebhook(raw) }

// Due reports whether a run is worth a message: it created snapshots,
// deleted claims, had failures or ended in error. A fleet report's summary
// is the total of its clusters.
func Due(r *report.Report, runErr error) bool {
	s := r.Summary
	return runErr != nil || s.SnapshotsCreated > 0 || s.ClaimsDeleted > 0 || s.Failures > 0
}

// Text is the message: one headline and the numbers, Slack mrkdwn.
func Text(r *report.Report, runErr error) string {
	var b strings.Builder
	status := "acted"
	if runErr != nil || r.Summary.Failures > 0 {
		status = "needs attention"
	}
	fmt.Fprintf(&b, "*pvc-janitor %s* on `%s` %s", r.Command, r.Cluster, status)
	if r.DryRun {
		b.WriteString(" (dry run)")
	}
	fmt.Fprintf(&b, "\n%d snapshots created, %d claims deleted, %d failures, %d claims in scope",
		r.Summary.SnapshotsCreated, r.Summary.ClaimsDeleted, r.Summary.Failures, r.Summary.Claims)
	if len(r.Summary.States) > 0 {
		keys := make([]string, 0, len(r.Summary.States))
		for k := range r.Summary.States {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Summary.States[k]))
		}
		b.WriteString("\nstates: " + strings.Join(parts, ", "))
	}
	// A fleet run: one line per cluster, labelled with its context.
	for _, c := range r.Clusters {
		fmt.Fprintf(&b, "\ncluster `%s`: exit %d", c.Name, c.ExitCode)
		if s := c.Summary; s != nil {
			fmt.Fprintf(&b, ", %d snapshots created, %d claims deleted, %d failures, %d claims in scope",
				s.SnapshotsCreated, s.ClaimsDeleted, s.Failures, s.Claims)
		}
		if c.Error != "" {
			b.WriteString(", error: " + c.Error)
		}
	}
	for _, n := range r.Notes {
		b.WriteString("\nnote: " + n)
	}
	if runErr != nil {
		b.WriteString("\nerror: " + runErr.Error())
	}
	return b.String()
}

// Post sends the message, retried by the one policy of a run's posts
// (retry.Outbound) within retry.DefaultBudget: a 4xx other than 408, 425
// and 429 is not tried again. Errors name the webhook only as "the notify
// webhook", never by URL.
func Post(ctx context.Context, client *http.Client, webhook string, r *report.Report, runErr error) error {
	return postWithin(ctx, client, webhook, r, runErr, retry.DefaultBudget)
}

// postWithin is Post with its retries within budget.
func postWithin(ctx context.Context, client *http.Client, webhook string, r *report.Report, runErr error, budget time.Duration) error {
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	body, err := json.Marshal(map[string]string{"text": Text(r, runErr)})
	if err != nil {
		return err
	}
	return retryPost(ctx, client, webhook, body, budget, "the notify webhook")
}

// post sends a JSON body and returns the HTTP status. Its errors never
// carry the URL (whoever has a webhook's URL can post to its channel).
func post(ctx context.Context, client *http.Client, webhook string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhook, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("invalid webhook URL")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the URL
		}
		return 0, fmt.Errorf("post to the webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, nil
}
