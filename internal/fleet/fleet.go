// Package fleet runs one janitor command against several clusters (the
// contexts of a kubeconfig) at once: each context gets its own clients, rate
// limiter, server clock, Lease and retries, because the function it runs
// builds them from the context's name; nothing is shared between clusters
// but the bound on how many run at once. Exit codes are merged by ExitCode.
package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
)

// DefaultConcurrency is --cluster-concurrency's default.
const DefaultConcurrency = 4

// Contexts resolves the contexts a run covers: the names given (repeated
// or comma-separated --context), or with all every context of the
// kubeconfig (--all-contexts), in the kubeconfig's order of names. Names
// are checked against the kubeconfig: an unknown one is a usage error.
// No names and not all: nil (the current context only, as today).
func Contexts(kubeconfig string, names []string, all bool) ([]string, error) {
	var flat []string
	for _, n := range names {
		for _, p := range strings.Split(n, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(flat, p) {
				flat = append(flat, p)
			}
		}
	}
	if len(flat) == 0 && !all {
		return nil, nil
	}
	if len(flat) > 0 && all {
		return nil, exitcode.New(exitcode.Usage, fmt.Errorf("--context and --all-contexts are exclusive"))
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := rules.Load()
	if err != nil {
		return nil, exitcode.New(exitcode.Usage, fmt.Errorf("kubeconfig: %w", err))
	}
	known := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		known = append(known, name)
	}
	slices.Sort(known)
	if all {
		if len(known) == 0 {
			return nil, exitcode.New(exitcode.Usage, fmt.Errorf("--all-contexts: the kubeconfig has no contexts"))
		}
		return known, nil
	}
	for _, n := range flat {
		if !slices.Contains(known, n) {
			return nil, exitcode.New(exitcode.Usage, fmt.Errorf("context %q not found in the kubeconfig (it has: %s)", n, strings.Join(known, ", ")))
		}
	}
	return flat, nil
}

// Result is one cluster's outcome.
type Result[T any] struct {
	Context string
	Value   T
	Err     error
}

// Run calls fn once per context, at most concurrency at a time, and returns
// the results in the order of contexts. A failing cluster never stops the
// others; ctx's end stops starting new ones (their results carry ctx's
// error).
func Run[T any](ctx context.Context, contexts []string, concurrency int, fn func(ctx context.Context, name string) (T, error)) []Result[T] {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	out := make([]Result[T], len(contexts))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, name := range contexts {
		out[i].Context = name
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i].Err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i].Value, out[i].Err = fn(ctx, name)
		}()
	}
	wg.Wait()
	return out
}

// severity orders exit codes, most serious first: a usage error (nothing
// was done anywhere it applies), a runtime error (a cluster could not be
// read: its data is unknown), the lease held (a cluster was not acted on),
// data at risk (guard), a partial failure, success. Interrupts outrank all:
// the run as a whole was stopped.
var severity = []int{exitcode.Interrupted, exitcode.Terminated, exitcode.Usage, exitcode.Runtime,
	exitcode.LockHeld, exitcode.DataAtRisk, exitcode.Partial, exitcode.OK}

// ExitCode merges the clusters' exit codes: the most serious by severity;
// an unknown code counts as a runtime error.
func ExitCode(codes []int) int {
	best := len(severity) - 1
	for _, c := range codes {
		i := slices.Index(severity, c)
		if i < 0 {
			i = slices.Index(severity, exitcode.Runtime)
		}
		if i < best {
			best = i
		}
	}
	return severity[best]
}
