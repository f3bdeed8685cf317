#!/usr/bin/env bash
# Makes the pinned Pulumi toolchain available and prints the bin folder that holds it:
#   pulumi                         engine + CLI, built from github.com/pulumi/pulumi/pkg/v3
#   pulumi-language-nodejs         the upstream Node.js language host, built from its source
#                                  in ../shared/vendor (see toolchain/language-host/)
#   pulumi-resource-pulumi-nodejs  the dynamic-provider plugin script from @pulumi/pulumi
# and installs the command provider (pulumi-resource-command, built from its source in
# ../shared/vendor) where Pulumi looks for plugins: $PULUMI_HOME/plugins/resource-command-v<version>.
#
# Whatever the user already has is used: a `pulumi` of the pinned version with its
# language host on PATH, a command plugin of the pinned version in `pulumi plugin ls`.
# Builds are cached outside the clone, keyed by version and by the sha256 of every input,
# so a second run (or a fresh clone on the same machine) takes well under a second. Safe
# to interrupt: builds go to a temporary folder that is renamed into place.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

say() { echo "toolchain: $*" >&2; }
fail() { echo "toolchain: FAILED at step '$1': $2" >&2; exit 1; }

cache_root=${DFLASH_TOOLCHAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dflash-pulumi/toolchain}
vendor=${DFLASH_VENDOR_DIR:-$root/../shared/vendor}
plugins=${PULUMI_HOME:-$HOME/.pulumi}/plugins
command_plugin_dir="$plugins/resource-command-v$COMMAND_VERSION"

dynamic_plugin="$root/node_modules/@pulumi/pulumi/pulumi-resource-pulumi-nodejs"
[ -f "$dynamic_plugin" ] || fail "find @pulumi/pulumi" "$dynamic_plugin is missing: run 'npm ci' in $root first"

# The vendored sources must be exactly the pinned ones.
vendored() { # file sha256 what
  local f="$vendor/$1"
  [ -f "$f" ] || return 1
  local got
  got=$(sha256sum "$f" | cut -d' ' -f1)
  [ "$got" = "$2" ] || fail "check $3 source" "$f has sha256 $got, expected $2 (toolchain/versions.env); restore the upstream tarball"
}

# A cached build is used only while its files are the ones built: each build folder keeps the
# sha256 of every file under bin/ (SHA256SUMS, written when it is built), checked on every use,
# so a binary changed or replaced in the cache afterwards is refused, not run. A folder built
# before these sums existed gets them at its first use. (Whoever can write the cache can also
# rewrite its sums: the cache must be writable only by the user whose jobs run main's code;
# docs/review.md, threat model.)
verified() { # folder what
  local dir=$1 what=$2
  [ -d "$dir/bin" ] || return 1
  if [ ! -f "$dir/SHA256SUMS" ]; then
    (cd "$dir" && find bin -type f -print0 | sort -z | xargs -0 sha256sum > SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS) ||
      fail "record the hashes of $what" "could not write $dir/SHA256SUMS"
    say "recorded the sha256 of the cached $what ($dir/SHA256SUMS)"
  fi
  # Hashing the engine's 170 MB costs about 0.5 s of CPU, on every `npx pulumi` and every
  # program that finds the toolchain. A folder whose files still have the inode, size, mtime
  # and ctime they had at its last full check (SHA256SUMS.stat) is not hashed again: a file
  # written or replaced since has another ctime or inode (ctime cannot be set back by a
  # program), so it is hashed and checked as before.
  local now
  now=$(cd "$dir" && find bin -type f -print0 | sort -z | xargs -0 stat -c '%n %i %s %.9Y %.9Z') ||
    fail "verify the cached $what" "could not read the files of $dir/bin"
  [ -f "$dir/SHA256SUMS.stat" ] && [ "$now" = "$(cat "$dir/SHA256SUMS.stat")" ] && return 0
  (cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS >/dev/null 2>&1) ||
    fail "verify the cached $what" "a file in $dir/bin is not the one built there (its sha256 differs from $dir/SHA256SUMS): it was changed after the build. Remove $dir to build it again"
  # Best effort: without the record, the next use hashes again. Not recorded while a file
  # changed in the last 2 s: a change within the same clock tick would keep its ctime (git's
  # "racily clean" case).
  local newest
  newest=$(printf '%s\n' "$now" | awk '{ if ($NF > m) m = $NF } END { printf "%d", m }')
  [ "$newest" -lt $(( $(date +%s) - 2 )) ] || return 0
  if printf '%s\n' "$now" > "$dir/SHA256SUMS.stat.$$" 2>/dev/null; then mv -f "$dir/SHA256SUMS.stat.$$" "$dir/SHA256SUMS.stat"; fi
}

build_env() {
  export CGO_ENABLED=0 GOFLAGS=-mod=readonly
  command -v go >/dev/null 2>&1 || fail "find go" "the Go toolchain is needed to build $1 (apt-get install golang, or Go >= 1.26 from go.dev)"
}

# Builds $2 into folder $1 (cached) by running function $3 in a temporary folder.
cached_build() { # dest what builder
  local dest=$1 what=$2 builder=$3
  [ -d "$dest" ] && return 0
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.lock"
  flock 9
  if [ ! -d "$dest" ]; then
    local tmp start
    tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
    start=$(date +%s)
    say "building $what (cold: a few minutes; cached afterwards in $dest)"
    if ! (cd "$tmp" && "$builder" "$tmp") >&2; then rm -rf "$tmp"; fail "build $what" "see the go output above"; fi
    (cd "$tmp" && find bin -type f -print0 | sort -z | xargs -0 sha256sum > SHA256SUMS) || { rm -rf "$tmp"; fail "record the hashes of $what" "sha256sum failed in $tmp"; }
    rm -rf "$dest"
    mv "$tmp" "$dest"
    say "built $what in $(( $(date +%s) - start )) s"
  fi
  exec 9>&-
}

build_engine() { # out
  (cd "$here/go" && go build -trimpath -tags osusergo,grpcnotrace \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
    -o "$1/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  local got
  if ! got=$("$1/bin/pulumi" version) || [ "$got" != "$PULUMI_VERSION" ]; then
    echo "built pulumi reports '$got', expected '$PULUMI_VERSION'"
    return 1
  fi
}

build_language_host() { # out
  mkdir -p "$1/src" "$1/bin"
  tar xzf "$vendor/$LANGUAGE_HOST_SOURCE" -C "$1/src"
  local pkg="$1/src/sdk/nodejs/cmd/pulumi-language-nodejs"
  # Upstream code unchanged; our go.mod (SDK $PULUMI_VERSION) and the one forwarding method it needs.
  cp "$here/language-host/go.mod" "$here/language-host/go.sum" "$here/language-host/exists_resource.go" "$pkg/"
  (cd "$pkg" && go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" -o "$1/bin/pulumi-language-nodejs" .)
  rm -rf "$1/src"
}

build_command() { # out
  mkdir -p "$1/src" "$1/bin"
  tar xzf "$vendor/$COMMAND_SOURCE" -C "$1/src"
  (cd "$1/src/provider" && go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi-command/provider/pkg/version.Version=$COMMAND_VERSION" -o "$1/bin/pulumi-resource-command" ./cmd/pulumi-resource-command)
  rm -rf "$1/src"
}

# 1. Engine and language host: the user's, if they are the pinned version, else ours.
bin=""
if [ -z "${DFLASH_FORCE_BUILD:-}" ] && command -v pulumi >/dev/null 2>&1 && command -v pulumi-language-nodejs >/dev/null 2>&1; then
  if [ "$(pulumi version 2>/dev/null || true)" = "$PULUMI_VERSION" ]; then
    bin=$(dirname "$(command -v pulumi)")
    say "using the installed pulumi $PULUMI_VERSION in $bin"
  fi
fi
if [ -z "$bin" ]; then
  engine="$cache_root/pulumi-$PULUMI_VERSION-$(cat "$here/versions.env" "$here/go/go.mod" "$here/go/go.sum" | sha256sum | cut -c1-16)"
  [ -x "$engine/bin/pulumi" ] || { build_env "pulumi $PULUMI_VERSION"; cached_build "$engine" "pulumi $PULUMI_VERSION from the Go module proxy" build_engine; }
  verified "$engine" "pulumi $PULUMI_VERSION"
  host="$cache_root/language-nodejs-$PULUMI_VERSION-$(cat "$here/versions.env" "$here/language-host/"* | sha256sum | cut -c1-16)"
  if [ ! -x "$host/bin/pulumi-language-nodejs" ]; then
    vendored "$LANGUAGE_HOST_SOURCE" "$LANGUAGE_HOST_SOURCE_SHA256" "language host" ||
      fail "find the language host" "no pulumi-language-nodejs $PULUMI_VERSION on PATH and no $vendor/$LANGUAGE_HOST_SOURCE to build it from. Install the Pulumi CLI $PULUMI_VERSION (it ships pulumi-language-nodejs) and put it on PATH, e.g. curl -fsSL https://get.pulumi.com | sh -s -- --version ${PULUMI_VERSION#v}"
    build_env "pulumi-language-nodejs"
    cached_build "$host" "the upstream pulumi-language-nodejs" build_language_host
  fi
  verified "$host" "pulumi-language-nodejs"
  bin="$cache_root/$(basename "$engine")+$(basename "$host")/bin"
  # The folder that is run: its copies must be the verified builds (and the SDK's plugin script).
  if [ ! -x "$bin/pulumi-resource-pulumi-nodejs" ] || ! cmp -s "$dynamic_plugin" "$bin/pulumi-resource-pulumi-nodejs" ||
    ! cmp -s "$engine/bin/pulumi" "$bin/pulumi" || ! cmp -s "$host/bin/pulumi-language-nodejs" "$bin/pulumi-language-nodejs"; then
    mkdir -p "$bin"
    # Real files side by side (hard links, not symlinks): Pulumi trusts plugins that sit
    # next to its own executable and warns "using ... from \$PATH" about any other.
    ln -f "$engine/bin/pulumi" "$bin/pulumi" 2>/dev/null || cp -f "$engine/bin/pulumi" "$bin/pulumi"
    ln -f "$host/bin/pulumi-language-nodejs" "$bin/pulumi-language-nodejs" 2>/dev/null || cp -f "$host/bin/pulumi-language-nodejs" "$bin/pulumi-language-nodejs"
    install -m 0755 "$dynamic_plugin" "$bin/pulumi-resource-pulumi-nodejs"
  fi
fi

# 2. The command provider, where Pulumi finds plugins (no "using ... from \$PATH" warning).
if [ ! -x "$command_plugin_dir/pulumi-resource-command" ]; then
  if [ -n "$(PATH="$bin:$PATH" pulumi plugin ls 2>/dev/null | awk -v v="$COMMAND_VERSION" '$1=="command" && $2=="resource" && $3==v')" ]; then
    : # installed by the user in a way we do not know about; Pulumi finds it
  else
    vendored "$COMMAND_SOURCE" "$COMMAND_SOURCE_SHA256" "command provider" ||
      fail "find the command provider" "pulumi-resource-command $COMMAND_VERSION is not installed and $vendor/$COMMAND_SOURCE is not there to build it from. Install it with: pulumi plugin install resource command v$COMMAND_VERSION"
    cmd="$cache_root/command-$COMMAND_VERSION-$(grep COMMAND_ "$here/versions.env" | sha256sum | cut -c1-16)"
    [ -x "$cmd/bin/pulumi-resource-command" ] || { build_env "pulumi-resource-command"; cached_build "$cmd" "pulumi-resource-command $COMMAND_VERSION" build_command; }
    verified "$cmd" "pulumi-resource-command $COMMAND_VERSION"
    mkdir -p "$command_plugin_dir"
    install -m 0755 "$cmd/bin/pulumi-resource-command" "$command_plugin_dir/.pulumi-resource-command.tmp"
    mv -f "$command_plugin_dir/.pulumi-resource-command.tmp" "$command_plugin_dir/pulumi-resource-command"
    say "installed pulumi-resource-command $COMMAND_VERSION in $command_plugin_dir"
  fi
fi
echo "$bin"
