#!/usr/bin/env bash
# together.sh NAME COMMAND [NAME COMMAND ...]: runs each COMMAND (a bash
# command line) at the same time, each line of its output prefixed with
# "[NAME] " as it comes; then one line per command with its exit code and
# wall time. Exits 1 if any failed.
#
# make test runs this way its two stages that wait on their own control
# planes more than on the CPU: the contract suite on the oldest minor, and
# safety and chaos without the Unused condition (docs/testing.md).
set -uo pipefail
if (($# == 0 || $# % 2 != 0)); then
	echo "usage: together.sh NAME COMMAND [NAME COMMAND ...]" >&2
	exit 2
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
names=() pids=()
while (($#)); do
	i=${#names[@]}
	names+=("$1")
	(
		start=$SECONDS
		bash -c "$2" 2>&1 | sed -u "s/^/[$1] /"
		echo "${PIPESTATUS[0]} $((SECONDS - start))" >"$dir/$i"
	) &
	pids+=($!)
	shift 2
done
failed=0
for i in "${!pids[@]}"; do
	wait "${pids[$i]}"
	read -r rc secs <"$dir/$i" || { rc=1 secs=?; }
	echo "together: ${names[$i]} exited $rc after $secs s"
	((rc == 0)) || failed=1
done
exit "$failed"
