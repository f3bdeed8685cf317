# shellcheck shell=bash
# shellcheck disable=SC2154 # the values (backend, server, state_dir) come from the rendered header (components/fleet/render.ts)
# dflash-sglang: the balancer's servers as the fleet's steps read them, through the runtime API
# (host/balancer-api.sh `api`, which comes first).

# servers BACKEND: one line per server of BACKEND, joined from `show servers state` (its
# operational and administrative state) and `show stat` (its sessions and its check):
#   NAME ADDR:PORT op=N admin=N scur=N qcur=N status=TEXT check=TEXT
# (an IPv6 ADDR in brackets, as a URL takes it).
# op: 0 stopped, 1 starting, 2 running, 3 stopping; admin: a bit mask (1, 2, 4, 32, 64: in
# maintenance; 8, 16: draining; 0: ready). Status 1 when HAProxy did not answer.
servers() {
  local states stats
  states=$(api "show servers state $1") || return 1
  stats=$(api "show stat") || return 1
  awk -v be="$1" '
    FNR == 1 { file++ }
    file == 1 && $0 !~ /^#/ && NF >= 7 && $2 == be { a = $5; if (a ~ /:/) a = "[" a "]"; addr[$4] = a ":" $19; op[$4] = $6; admin[$4] = $7; order[++n] = $4 }
    file == 2 && /^# / { sub(/^# /, ""); split($0, h, ","); for (i in h) col[h[i]] = i; next }
    file == 2 && col["pxname"] {
      split($0, f, ",")
      if (f[col["pxname"]] == be) { scur[f[col["svname"]]] = f[col["scur"]]; qcur[f[col["svname"]]] = f[col["qcur"]]; st[f[col["svname"]]] = f[col["status"]]; ck[f[col["svname"]]] = f[col["check_status"]] }
    }
    END {
      for (i = 1; i <= n; i++) {
        # status "UP 1/2" (going down) and check "* L7OK" (a check in progress): one word each.
        s = order[i]; status = st[s]; gsub(/ /, "_", status); check = ck[s]; sub(/^\* /, "", check); gsub(/ /, "_", check)
        printf "%s %s op=%s admin=%s scur=%s qcur=%s status=%s check=%s\n", s, addr[s], op[s], admin[s], scur[s] + 0, qcur[s] + 0, status, check
      }
    }' <(printf '%s\n' "$states") <(printf '%s\n' "$stats")
}

# serving LINE: whether a line of `servers` is a server HAProxy sends requests to: running
# (op 2, or 1 while its slowstart ramps it up), its check passing, neither draining nor in
# maintenance (admin bit 4 alone is the configuration's `disabled`, which a `state ready` lifted).
serving() {
  local op admin status
  op=$(sed -n 's/.* op=\([0-9]*\) .*/\1/p' <<<"$1")
  admin=$(sed -n 's/.* admin=\([0-9]*\) .*/\1/p' <<<"$1")
  status=$(sed -n 's/.* status=\([^ ]*\) .*/\1/p' <<<"$1")
  { [ "$op" = 2 ] || [ "$op" = 1 ]; } && [ -n "$admin" ] && [ $((admin & ~4)) = 0 ] && [[ "$status" == UP* ]]
}

# held LINE: whether a line of `servers` is a replica an operator took out by hand: in
# maintenance or draining, after this stack put it in (joined/NAME), and not by a rollout of
# this stack (left/NAME).
held() {
  local name admin
  name=${1%% *}
  admin=$(sed -n 's/.* admin=\([0-9]*\) .*/\1/p' <<<"$1")
  [ -n "$admin" ] && [ $((admin & (1 | 2 | 8 | 16 | 32 | 64))) != 0 ] && [ -e "$state_dir/joined/$name" ] && [ ! -e "$state_dir/left/$name" ]
}

# set_state STATE: `set server $backend/$server state STATE`; status 1 when HAProxy did not
# answer or answered anything (it answers a change it made with nothing, a refusal in words).
set_state() {
  local out
  out=$(api "set server $backend/$server state $1") || return 1
  [ -z "${out//[[:space:]]/}" ] || { printf '%s\n' "$out"; return 1; }
}
