#!/usr/bin/env bash
# make release-check, step 5: the README's install steps, as written there,
# against what GoReleaser builds for a tag. Nothing is published and nothing
# leaves the machine:
#
#   1. GoReleaser builds a release of this platform (a copy of
#      .goreleaser.yaml narrowed to it) versioned as the tag v$VERSION would
#      be (GORELEASER_CURRENT_TAG and RELEASE_CHECK_AS_TAG; no git tag is
#      written), VERSION being the README's own: the archive, the checksums
#      file and the krew manifest, under the names a release carries.
#   2. Those files are served on 127.0.0.1 under the release's download path.
#   3. The README's two install blocks (after "**Release archive**" and
#      "**krew**") are cut out of README.md and run with bash -eu. Only
#      what cannot run here is changed: github.com becomes the loopback
#      server, /usr/local/bin/ a sandbox folder (sudo runs the command as
#      is), PLATFORM this platform; `kubectl krew install --manifest=F` gets
#      --archive with the archive the manifest names (krew would download
#      it from github.com: its URL is checked to be the release's).
#   4. Both installs must report the README's version: `janitor version`
#      and `kubectl janitor version` (the pinned kubectl, the pinned krew).
#
# Usage: readme-install.sh GORELEASER KUBECTL KREW
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
goreleaser="$1" kubectl="$2" krew="$3"

log() { printf '[release-check %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

cd "$root"
version="$(sed -n 's/^VERSION=\([^ ]*\).*/\1/p' README.md | head -n1)"
[[ -n "$version" ]] || fail "README.md sets no VERSION= in its install steps"
goos="$(go env GOOS)" goarch="$(go env GOARCH)"
platform="${goos}_${goarch}"

work="$(mktemp -d)"
server_pid=""
cleanup() {
	if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

log "goreleaser release --snapshot for $platform as tag v$version (nothing published)"
sed -e "s/^    goos: \[.*\]/    goos: [$goos]/" -e "s/^    goarch: \[.*\]/    goarch: [$goarch]/" .goreleaser.yaml >"$work/goreleaser.yaml"
grep -q "goos: \[$goos\]" "$work/goreleaser.yaml" || fail "could not narrow .goreleaser.yaml's goos to $goos"
RELEASE_CHECK_AS_TAG=1 GORELEASER_CURRENT_TAG="v$version" \
	"$goreleaser" release --snapshot --clean --config "$work/goreleaser.yaml" --skip=docker,publish,sign,sbom,announce >&2

# The krew manifest goes with the release (release.extra_files), as the
# README downloads it; a snapshot publishes nothing, so the resolved
# configuration says it.
grep -q 'glob: ./dist/krew/janitor.yaml' dist/config.yaml ||
	fail "the release does not attach dist/krew/janitor.yaml (release.extra_files of .goreleaser.yaml)"

# The files the release carries, under its download path.
download="$work/www/pvc-janitor/pvc-janitor/releases/download/v$version"
mkdir -p "$download"
archive="pvc-janitor_${version}_${platform}.tar.gz"
for f in "dist/$archive" "dist/pvc-janitor_${version}_checksums.txt" dist/krew/janitor.yaml; do
	[[ -f "$f" ]] || fail "the release lacks $f (what the README downloads)"
	cp "$f" "$download/"
done
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work/www" >"$work/server.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 50); do
	port="$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$work/server.log" | head -n1)"
	[[ -n "$port" ]] && break
	sleep 0.1
done
[[ -n "$port" ]] || fail "the loopback file server did not start: $(cat "$work/server.log")"

# The README's blocks, as written.
extract() {
	awk -v head="$1" '
		index($0, head) == 1 { found = 1; next }
		found && /^```sh$/ { inblock = 1; next }
		inblock && /^```$/ { exit }
		inblock { print }
	' README.md
}
steps="$(extract '**Release archive**'; extract '**krew**')"
for want in 'sha256sum -c' '_checksums.txt' 'tar xzf' 'janitor version' '/janitor.yaml' 'kubectl krew install --manifest=janitor.yaml' 'kubectl janitor version'; do
	[[ "$steps" == *"$want"* ]] || fail "the README's install steps lack \"$want\":"$'\n'"$steps"
done
sandbox="$work/sandbox"
mkdir -p "$sandbox/bin" "$sandbox/shims" "$sandbox/home" "$sandbox/cwd"
script="$(printf '%s\n' "$steps" | sed \
	-e "s|https://github.com/|http://127.0.0.1:$port/|g" \
	-e "s|/usr/local/bin/|$sandbox/bin/|g" \
	-e "s|^PLATFORM=[^ ]*|PLATFORM=$platform|")"
printf '%s\n' "$script" >"$work/steps.sh"
log "the README's install steps, as run:"$'\n'"$script"

printf '#!/usr/bin/env bash\nexec "$@"\n' >"$sandbox/shims/sudo"
cat >"$sandbox/shims/kubectl" <<SHIM
#!/usr/bin/env bash
# kubectl, but \`krew install --manifest=F\` takes the archive F names from
# the loopback release instead of github.com.
if [[ "\${1:-}" == krew && "\${2:-}" == install && "\${3:-}" == --manifest=* ]]; then
	manifest="\${3#--manifest=}"
	uri="\$(sed -n 's/^ *uri: *//p' "\$manifest" | grep "_${platform}\\." | head -n1)"
	[[ "\$uri" == "https://github.com/pvc-janitor/pvc-janitor/releases/download/v$version/$archive" ]] ||
		{ echo "krew manifest: uri \$uri for $platform, want the release's $archive" >&2; exit 1; }
	exec "$krew" install --manifest="\$manifest" --archive="$download/\$(basename "\$uri")"
fi
exec "$kubectl" "\$@"
SHIM
chmod +x "$sandbox/shims/sudo" "$sandbox/shims/kubectl"

out="$(cd "$sandbox/cwd" && env -i HOME="$sandbox/home" KREW_ROOT="$sandbox/krew" KUBECONFIG=/dev/null \
	PATH="$sandbox/shims:$sandbox/bin:$sandbox/krew/bin:/usr/bin:/bin" bash -eu "$work/steps.sh" 2>&1)" ||
	fail "the README's install steps failed:"$'\n'"$out"
log "their output:"$'\n'"$out"
[[ -x "$sandbox/bin/janitor" ]] || fail "the archive steps installed no janitor"
[[ -x "$sandbox/krew/bin/kubectl-janitor" ]] || fail "krew installed no kubectl-janitor"
n="$(grep -c "janitor $version " <<<"$out" || true)"
[[ "$n" == 2 ]] || fail "want janitor version and kubectl janitor version to print $version (the tag's), got:"$'\n'"$out"
log "the README's install steps work as written: janitor $version, from the archive and from krew"
