#!/usr/bin/env bash
# Makes a pinned Pulumi toolchain available and prints the bin folder that holds it:
#   pulumi                         engine + CLI, built from github.com/pulumi/pulumi/pkg/v3
#   pulumi-language-nodejs         our language host (toolchain/go/cmd/pulumi-language-nodejs)
#   pulumi-resource-pulumi-nodejs  the dynamic-provider plugin script from @pulumi/pulumi
# Binaries are cached outside the clone, keyed by version and by the hash of our Go
# sources, so a second run (or a fresh clone on the same machine) takes well under a
# second. Safe to interrupt: builds go to a temporary folder that is renamed into place.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

say() { echo "toolchain: $*" >&2; }
fail() { echo "toolchain: FAILED at step '$1': $2" >&2; exit 1; }

cache_root=${DFLASH_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dflash-pulumi/toolchain}
src_hash=$(cd "$here" && cat versions.env go/go.mod go/go.sum go/cmd/pulumi-language-nodejs/main.go | sha256sum | cut -c1-16)
dest="$cache_root/pulumi-$PULUMI_VERSION-$src_hash"

dynamic_plugin="$root/node_modules/@pulumi/pulumi/pulumi-resource-pulumi-nodejs"
[ -f "$dynamic_plugin" ] || fail "find @pulumi/pulumi" "$dynamic_plugin is missing: run 'npm ci' in $root first"

# A user who installed Pulumi normally: use that engine and its language host.
if [ -z "${DFLASH_FORCE_BUILD:-}" ] && command -v pulumi >/dev/null 2>&1 && command -v pulumi-language-nodejs >/dev/null 2>&1; then
  have=$(pulumi version 2>/dev/null || true)
  if [ "$have" = "$PULUMI_VERSION" ]; then
    dir=$(dirname "$(command -v pulumi)")
    say "using the installed pulumi $have in $dir"
    echo "$dir"
    exit 0
  fi
fi

if [ -x "$dest/bin/pulumi" ] && [ -x "$dest/bin/pulumi-language-nodejs" ] && [ -x "$dest/bin/pulumi-resource-pulumi-nodejs" ]; then
  echo "$dest/bin"
  exit 0
fi

command -v go >/dev/null 2>&1 || fail "find go" "the Go toolchain is needed to build Pulumi $PULUMI_VERSION (apt-get install golang, or Go >= 1.26 from go.dev)"
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if [ -x "$dest/bin/pulumi" ] && [ -x "$dest/bin/pulumi-language-nodejs" ]; then echo "$dest/bin"; exit 0; fi

tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
mkdir -p "$tmp/bin"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
flags=(-trimpath -tags osusergo,grpcnotrace)
say "building pulumi $PULUMI_VERSION from the Go module proxy (cold: several minutes; cached afterwards in $dest)"
(cd "$here/go" && go build "${flags[@]}" \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
  -o "$tmp/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi) >&2 || fail "go build pulumi" "see the go output above"
say "building pulumi-language-nodejs"
(cd "$here/go" && go build "${flags[@]}" -ldflags "-s -w -X main.version=$LANGUAGE_HOST_VERSION" \
  -o "$tmp/bin/pulumi-language-nodejs" ./cmd/pulumi-language-nodejs) >&2 || fail "go build pulumi-language-nodejs" "see the go output above"
install -m 0755 "$dynamic_plugin" "$tmp/bin/pulumi-resource-pulumi-nodejs"
got=$("$tmp/bin/pulumi" version) || fail "run pulumi version" "the built binary does not run"
[ "$got" = "$PULUMI_VERSION" ] || fail "check version" "built pulumi reports '$got', expected '$PULUMI_VERSION'"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
say "built in $(( $(date +%s) - start )) s"
echo "$dest/bin"
