#!/usr/bin/env bash
# Sourced by every script of the project (set-up, tests, `npm run ...`, `npx pulumi`): puts
# Node.js 22 first on PATH when the machine's `node` is older. @pulumi/pulumi 3.276 and openai
# require Node.js >= 22 (npm warns EBADENGINE under 20, which reached end of life in April
# 2026), so everything here runs under 22: `npm ci`, tsx, the tests, and the Pulumi language
# host, which runs the `node` it finds on PATH.
#
# The binary comes from the npm registry's `node-linux-<arch>` package (the official build,
# as the `node` package installs it), fetched once with `npm pack`, checked against the
# integrity pinned here and cached outside the clone, keyed by version:
# ~/.cache/dflash-pulumi/node/v<version>-linux-<arch>/bin/node. A machine whose `node` is 22
# or newer uses its own and fetches nothing.
dflash_node_version=22.23.5

# The project's own folder for Node's compile cache; nothing where there is no home or cache folder.
dflash_compile_cache() {
  if [ -n "${XDG_CACHE_HOME:-${HOME:-}}" ]; then echo "${XDG_CACHE_HOME:-$HOME/.cache}/dflash-pulumi/node-compile-cache"; fi
}

dflash_node_env() {
  local have major arch integrity cache dir tmp tgz got
  # V8's compiled code of every module a Node.js process loads (the Pulumi program, the dynamic
  # provider, the language host's probes, the tests) is kept on disk and reused by the next
  # process: a no-op `pulumi up` takes 0.91x the time without it (bench/results/engine-cost.md).
  # Node keys the cache by its version and checks each entry against the source it compiled;
  # Node.js before 22.1 ignores the variable. scripts/setup.sh bounds the folder's size.
  if [ -z "${NODE_COMPILE_CACHE:-}" ] && [ -n "$(dflash_compile_cache)" ]; then
    NODE_COMPILE_CACHE=$(dflash_compile_cache)
    export NODE_COMPILE_CACHE
  fi
  have=$(node -p 'process.versions.node' 2>/dev/null) || have=none
  major=${have%%.*}
  if [[ "$major" =~ ^[0-9]+$ ]] && [ "$major" -ge 22 ]; then return 0; fi
  if [ "$have" = none ]; then
    echo "setup: no working \`node\` on PATH: install Node.js 22 LTS (with npm) and run again" >&2
    return 1
  fi
  case "$(uname -m)" in
    x86_64) arch=x64 integrity=sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw== ;;
    aarch64 | arm64) arch=arm64 integrity=sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg== ;;
    *)
      echo "setup: Node.js $have is older than the 22 this project's dependencies need, and the npm registry has no Node.js build for $(uname -m): install Node.js 22 LTS and run again" >&2
      return 1
      ;;
  esac
  cache=${DFLASH_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dflash-pulumi/node}
  dir="$cache/v$dflash_node_version-linux-$arch"
  if [ ! -x "$dir/bin/node" ]; then
    mkdir -p "$cache"
    # What a killed fetch left, a day old or more; and a cache folder without its binary.
    find "$cache" -maxdepth 1 -name '.fetch.*' -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
    if [ -e "$dir" ]; then rm -rf "$dir"; fi
    echo "setup: Node.js $have is older than the 22 this project's dependencies need: fetching Node.js $dflash_node_version (npm package node-linux-$arch, about 50 MB) into $cache" >&2
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
    if ! (cd "$tmp" && npm pack --silent "node-linux-$arch@$dflash_node_version" >/dev/null); then
      rm -rf "$tmp"
      echo "setup: could not fetch node-linux-$arch@$dflash_node_version from the npm registry (npm pack failed, see above); install Node.js 22 LTS, or run again when the registry can be reached" >&2
      return 1
    fi
    tgz="$tmp/node-linux-$arch-$dflash_node_version.tgz"
    got="sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tgz")"
    if [ "$got" != "$integrity" ]; then
      rm -rf "$tmp"
      echo "setup: node-linux-$arch-$dflash_node_version.tgz has integrity $got, expected $integrity (pinned in scripts/node-env.sh): not using it" >&2
      return 1
    fi
    tar -xzf "$tgz" -C "$tmp"
    if ! "$tmp/package/bin/node" -e 'process.exit(process.versions.node === process.argv[1] ? 0 : 1)' "$dflash_node_version"; then
      rm -rf "$tmp"
      echo "setup: the fetched Node.js $dflash_node_version does not run on this machine; install Node.js 22 LTS" >&2
      return 1
    fi
    # Renamed into place whole, so an interrupted fetch leaves no half binary; a concurrent
    # fetch that finished first wins.
    mv -T "$tmp/package" "$dir" 2>/dev/null || true
    rm -rf "$tmp"
    if [ ! -x "$dir/bin/node" ]; then
      echo "setup: could not put Node.js $dflash_node_version in place at $dir" >&2
      return 1
    fi
  fi
  export PATH="$dir/bin:$PATH"
}
