#!/usr/bin/env bash
# test-first-stage.sh: make test's first stage, go test -tags integration
# over every package, in three runs at once (scripts/together.sh): every
# package but test/e2e, and each half of test/e2e's tests. The e2e package
# is the stage's long pole (1,249 s of a 1,300 s stage on 2026-12-05) and
# waits on its control plane far more than it computes (load 0.3 while it
# ran alone), so two halves, each on its own control plane, take about
# half as long. The two slowest tests (TestChaos 204 s, TestRandomizedSafety
# 169 s; testsum names the slowest at the end of each run) go one to each
# half; the others alternate in name order. Every test of the package is in
# exactly one half.
set -euo pipefail
cd "$(dirname "$0")/.."
tags=integration
flags="-tags $tags -count=1 -timeout ${TEST_TIMEOUT:-40m}"
e2e=./test/e2e/
others=$(go list -tags "$tags" ./... | grep -v '/test/e2e$' | tr '\n' ' ')
mapfile -t tests < <(go test -tags "$tags" -list '.*' "$e2e" | grep '^Test' | sort)
if ((${#tests[@]} == 0)); then
	echo "test-first-stage: go test -list found no test in $e2e" >&2
	exit 1
fi
a=() b=()
i=0
for t in "${tests[@]}"; do
	case $t in
	TestChaos) a+=("$t") ;;
	TestRandomizedSafety) b+=("$t") ;;
	*) if ((i++ % 2 == 0)); then b+=("$t"); else a+=("$t"); fi ;;
	esac
done
re() {
	local IFS='|'
	echo "^($*)\$"
}
exec bash scripts/together.sh \
	packages "go run ./scripts/testsum $flags $others" \
	e2e-a "go run ./scripts/testsum $flags -run '$(re "${a[@]}")' $e2e" \
	e2e-b "go run ./scripts/testsum $flags -run '$(re "${b[@]}")' $e2e"
