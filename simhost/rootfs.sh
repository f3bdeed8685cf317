#!/usr/bin/env bash
# Builds (once) the Debian rootfs that every simulated GPU host boots from, and prints
# its path. Cached outside the clone, keyed by the hash of this recipe, so later runs
# (and fresh clones on the same machine) reuse it. Safe to interrupt: the tree is built
# in a temporary folder and renamed into place.
set -euo pipefail
suite=bookworm
# haproxy and socat (its runtime API's client) for the fleet's load-balancer host
# (components/fleet); disabled below, so GPU hosts do not run it.
# locales: hosts whose own locale writes numbers and orders letters otherwise (start --locale).
# libfaketime: a wall clock that steps for the processes started after (the campaign's clock-step:
# the machine's own clock is shared with every host and the machine, and is never touched).
packages=systemd,systemd-sysv,dbus,openssh-server,iproute2,python3,curl,procps,sudo,haproxy,socat,locales,libfaketime
# The locales a host may be given (simhost start --locale); C.UTF-8 is glibc's own.
host_locales="de_DE.UTF-8 tr_TR.UTF-8"
recipe_hash=$( (echo "$suite $packages $host_locales"; cat "${BASH_SOURCE[0]}") | sha256sum | cut -c1-16)
cache_root=${DFLASH_SIMHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dflash-pulumi/simhost}
dest="$cache_root/rootfs-$suite-$recipe_hash"

say() { echo "simhost rootfs: $*" >&2; }
fail() { echo "simhost rootfs: FAILED: $*" >&2; exit 1; }

if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi
[ "$(id -u)" = 0 ] || fail "building the host rootfs needs root (debootstrap, mounts)"
if ! command -v debootstrap >/dev/null || ! command -v systemd-nspawn >/dev/null; then
  say "installing debootstrap and systemd-container with apt-get"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap systemd-container) >&2 \
    || fail "could not install debootstrap systemd-container: run 'apt-get install debootstrap systemd-container'"
fi
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi

# The mirror this machine already uses (deb822 or one-line sources).
mirror=$(grep -hoE '^URIs:\s*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
[ -n "$mirror" ] || mirror=$(grep -hoE '^deb\s+\S+' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n1 || true)
[ -n "$mirror" ] || fail "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"

tmp="$cache_root/.build-$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
say "debootstrap $suite from $mirror (cold: about 2 minutes)"
debootstrap --variant=minbase --include="$packages" "$suite" "$tmp" "$mirror" >"$cache_root/debootstrap.log" 2>&1 \
  || fail "debootstrap failed; last lines of $cache_root/debootstrap.log:$(echo; tail -n 15 "$cache_root/debootstrap.log")"
for l in $host_locales; do echo "$l UTF-8" >> "$tmp/etc/locale.gen"; done
chroot "$tmp" locale-gen >"$cache_root/locale-gen.log" 2>&1 || fail "locale-gen failed; see $cache_root/locale-gen.log"
# A plain user for hosts where root may not log in over SSH (simhost start's sudoers option
# gives it its key and its sudo rights); "*": no password, and not a locked account.
chroot "$tmp" useradd --create-home --shell /bin/bash --password '*' deploy
# Installed, not running: only a fleet's balancer host runs HAProxy, once the program
# has written its configuration and enabled it (components/fleet/host/balancer.sh).
rm -f "$tmp"/etc/systemd/system/multi-user.target.wants/haproxy.service
# Per-host identity (machine-id, host keys) is made at host start, never shared.
rm -f "$tmp"/etc/ssh/ssh_host_* "$tmp/etc/machine-id"
: >"$tmp/etc/machine-id"
rm -rf "$tmp"/var/cache/apt/archives/*.deb
touch "$tmp/.complete"
mv "$tmp" "$dest"
trap - EXIT
say "built in $(( $(date +%s) - start )) s: $dest"
echo "$dest"
