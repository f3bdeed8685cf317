#!/usr/bin/env bats
# The fleet's balancer steps (components/fleet/host/balancer-step.sh over balancer-api.sh), in
# bash, against a fake HAProxy runtime API: a replica leaves only while fleet.minHealthy others
# serve (as HAProxy sees them and as each answers a generation), waits for HAProxy's sessions
# to it to end, and rejoins only once its check passes.

bats_require_minimum_version 1.5.0

FLEET_HOST_DIR=${DFLASH_FLEET_HOST_DIR:-$(cd "$BATS_TEST_DIRNAME/../../../../components/fleet/host" && pwd)}

setup() {
  cd "$BATS_TEST_TMPDIR" || exit 1
  mkdir -p bin
  # curl answers 200 for every replica but those listed in ./curl-fails.
  printf '#!/bin/bash\nfor a; do case "$a" in http://*) h=${a#http://}; grep -qxF "${h%%%%/*}" curl-fails && exit 22;; esac; done\nexit 0\n' >bin/curl
  chmod +x bin/curl
  : >curl-fails
  # socat reaches a replica's agent: it prints the line ./agent-replies holds for HOST:PORT
  # ("HOST:PORT REPLY"), else it is refused. Each agent asked goes to ./agent.log.
  printf '#!/bin/bash\nfor a; do case "$a" in TCP:*) t=${a#TCP:}; echo "$t" >>agent.log; r=$(grep -F -- "$t " agent-replies 2>/dev/null | head -n 1); [ -n "$r" ] || exit 1; echo "${r#* }"; exit 0;; esac; done\nexit 1\n' >bin/socat
  chmod +x bin/socat
  # curl logs each replica it asks for a generation to ./curl.log.
  sed -i '2i for a; do case "$a" in http://*) echo "$a" >>curl.log;; esac; done' bin/curl
  # No real unit or listener is read: ss prints ./ss-lines, systemctl says inactive.
  printf '#!/bin/bash\ncat ss-lines 2>/dev/null\n' >bin/ss
  printf '#!/bin/bash\necho inactive\nexit 3\n' >bin/systemctl
  chmod +x bin/ss bin/systemctl
  mkdir -p state cfg
  PATH=$BATS_TEST_TMPDIR/bin:$PATH
}

# servers_are "NAME OP ADMIN SCUR STATUS [QCUR]" ...: what HAProxy's runtime API answers from now on.
servers_are() {
  local i=0 name op admin scur status qcur
  printf '1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state ...\n' >states
  printf '# pxname,svname,qcur,scur,status,check_status\nsglang,FRONTEND,0,0,OPEN,\n' >stats
  for line in "$@"; do
    read -r name op admin scur status qcur <<<"$line"
    i=$((i + 1))
    echo "3 sglang $i $name ${ADDRESS_PREFIX:-127.0.0.1}$i $op $admin 1 1 9 6 3 4 6 0 0 0 - 30000 - 0 0 - - 0" >>states
    echo "sglang,$name,${qcur:-0},$scur,$status,L7OK" >>stats
  done
  echo "sglang,BACKEND,0,0,UP," >>stats
}

# step ACTION SERVER: runs the step as the host would, with the fake API.
step() {
  (
    socket=$BATS_TEST_TMPDIR/admin.sock state_file=$BATS_TEST_TMPDIR/server-state command_seconds=2
    lock_file=$BATS_TEST_TMPDIR/lock balancer=127.0.0.9:22 action=$1 backend=sglang server=${2:-} min_healthy=${MIN_HEALTHY:-2} agent_port=30001 wait_seconds=${WAIT:-3} poll=0.01
    state_dir=$BATS_TEST_TMPDIR/state operator_states=${OPERATOR_STATES:-keep} halt_on_open=${HALT:-no} unit_hash=${UNIT_HASH:-} unit_name=dflash-balancer-s.service config_path=$BATS_TEST_TMPDIR/cfg/s.cfg config_dir=$BATS_TEST_TMPDIR/cfg
    listen_address=${LISTEN_ADDRESS:-127.0.0.9} listen_port=8080 legacy_unit=haproxy.service legacy_config=$BATS_TEST_TMPDIR/legacy.cfg legacy_socket=$BATS_TEST_TMPDIR/legacy.sock legacy_head="# HAProxy for the SGLang fleet of stack s ("
    # shellcheck source=../../../../components/fleet/host/balancer-api.sh
    source "$FLEET_HOST_DIR/balancer-api.sh"
    # shellcheck source=../../../../components/fleet/host/balancer-servers.sh
    source "$FLEET_HOST_DIR/balancer-servers.sh"
    # shellcheck source=../../../../components/fleet/host/balancer-listen.sh
    source "$FLEET_HOST_DIR/balancer-listen.sh"
    # The runtime API: canned answers (./next-servers, once present, replaces the servers after
    # each `show stat`: a state that changes over time), every command logged.
    api() {
      echo "$1" >>api.log
      case "$1" in
      "show servers state"*) cat states ;;
      "show stat")
        cat stats
        if [ -s next-servers ]; then
          mapfile -t rows < <(head -n "$(($(wc -l <states) - 2))" next-servers)
          sed -i "1,${#rows[@]}d" next-servers
          [ "${#rows[@]}" -gt 0 ] && servers_are "${rows[@]}"
        fi
        ;;
      "set server"*) [ -z "${SET_ANSWER:-}" ] || echo "$SET_ANSWER" ;;
      *) return 1 ;;
      esac
    }
    # shellcheck source=../../../../components/fleet/host/balancer-step.sh
    source "$FLEET_HOST_DIR/balancer-step.sh"
  )
}

@test "show: a line per server, its state and sessions from both answers" {
  servers_are "replica1 2 0 3 UP" "replica2 2 8 0 DRAIN" "replica3 0 0 0 DOWN"
  run step show
  [ "$status" -eq 0 ]
  mapfile -t lines < <(grep -v '^@@' <<<"$output")
  [ "${lines[0]}" = "replica1 127.0.0.11:30000 op=2 admin=0 scur=3 qcur=0 status=UP check=L7OK" ]
  [ "${lines[1]}" = "replica2 127.0.0.12:30000 op=2 admin=8 scur=0 qcur=0 status=DRAIN check=L7OK" ]
  [ "${lines[2]}" = "replica3 127.0.0.13:30000 op=0 admin=0 scur=0 qcur=0 status=DOWN check=L7OK" ]
}

@test "leave: refused, nothing changed, where fewer than minHealthy others would serve" {
  servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 0 0 0 DOWN"
  run step leave replica1
  [ "$status" -eq 6 ]
  [[ "$output" == *"would leave 1 replica(s) serving (replica2), fewer than fleet.minHealthy (2); nothing was changed"* ]]
  ! grep -q "^set server" api.log
}

@test "leave: the others' agents are asked first; a text answer counts at once, with no /health_generate (which sleeps 1 s)" {
  servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "127.0.0.12:30001 up #answered" "127.0.0.13:30001 up #answered" >agent-replies
  run step leave replica1
  [ "$status" -eq 0 ]
  [[ "$output" == *"@@others serving 2: replica2 replica3"* ]]
  [ "$(sort agent.log | tr '\n' ' ')" = "127.0.0.12:30001 127.0.0.13:30001 " ]
  [ ! -e curl.log ]
}

@test "leave: an agent's down (a broken answer) does not count, whatever /health_generate says" {
  servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "127.0.0.12:30001 up #answered" "127.0.0.13:30001 down #the answer is garbage" >agent-replies
  run step leave replica1
  [ "$status" -eq 6 ]
  [[ "$output" == *"would leave 1 replica(s) serving (replica2), fewer than"* ]]
  ! grep -q "^set server" api.log
}

@test "leave: where an agent says nothing definite (none yet, or a plain up: a 503 or a timeout), /health_generate decides" {
  servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "127.0.0.12:30001 up" >agent-replies
  echo "127.0.0.13:30000" >curl-fails
  run step leave replica1
  [ "$status" -eq 6 ]
  [[ "$output" == *"would leave 1 replica(s) serving (replica2), fewer than"* ]]
  [ "$(sort curl.log | tr '\n' ' ')" = "http://127.0.0.12:30000/health_generate http://127.0.0.13:30000/health_generate " ]
}

@test "leave: an IPv6 replica's agent is reached in brackets" {
  ADDRESS_PREFIX="::1" servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "[::12]:30001 up #answered" "[::13]:30001 up #answered" >agent-replies
  run step leave replica1
  [ "$status" -eq 0 ]
  [ ! -e curl.log ]
}

@test "leave: a replica HAProxy calls up but that does not answer a generation itself does not count" {
  servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  echo "127.0.0.13:30000" >curl-fails
  run step leave replica1
  [ "$status" -eq 6 ]
  [[ "$output" == *"serving (replica2), fewer than"* ]]
  ! grep -q "^set server" api.log
}

@test "leave with fleet.drainPolicy halt: with enough others serving, drain, then wait until HAProxy holds no session for it" {
  servers_are "replica1 2 0 2 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "replica1 2 8 2 DRAIN" "replica2 2 0 0 UP" "replica3 2 0 0 UP" "replica1 2 8 1 DRAIN" "replica2 2 0 0 UP" "replica3 2 0 0 UP" "replica1 2 8 0 DRAIN" "replica2 2 0 0 UP" "replica3 2 0 0 UP" >next-servers
  HALT=yes run step leave replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state drain" api.log
  [[ "$output" == *"@@left replica1 "* ]]
  [[ "$output" != *"open="* ]]
  [[ "$output" != *"draining="* ]]
  # It read the sessions until they were 0: three answers after the drain.
  [ "$(grep -c '^show stat' api.log)" -ge 4 ]
}

@test "leave with fleet.drainPolicy cut: drain, then the requests it still runs go to the server's own drain at once (one wait, not two)" {
  servers_are "replica1 2 0 2 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "replica1 2 8 2 DRAIN" "replica2 2 0 0 UP" "replica3 2 0 0 UP" "replica1 2 8 1 DRAIN" "replica2 2 0 0 UP" "replica3 2 0 0 UP" "replica1 2 8 0 DRAIN" "replica2 2 0 0 UP" "replica3 2 0 0 UP" >next-servers
  run step leave replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state drain" api.log
  # The number before draining= is the seconds it waited (SECONDS' whole ticks: 0 or 1 idle, more
  # on a loaded machine); the show-stat count below is what says it did not wait twice.
  [[ "$output" =~ "@@left replica1 "[0-9]+" draining=2" ]]
  [ -e state/left/replica1 ]
  # The count before the drain, and one reading after it.
  [ "$(grep -c '^show stat' api.log)" -eq 2 ]
}

@test "leave with fleet.drainPolicy cut: it waits while HAProxy still queues requests for the replica" {
  servers_are "replica1 2 0 2 UP 1" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  printf '%s\n' "replica1 2 8 2 DRAIN 1" "replica2 2 0 0 UP" "replica3 2 0 0 UP" "replica1 2 8 3 DRAIN 0" "replica2 2 0 0 UP" "replica3 2 0 0 UP" >next-servers
  run step leave replica1
  [ "$status" -eq 0 ]
  [[ "$output" == *"@@left replica1 "*" draining=3"* ]]
  [ "$(grep -c '^show stat' api.log)" -ge 3 ]
}

@test "leave: past its wait, it says how many requests are still open and moves on (fleet.drainPolicy cut)" {
  servers_are "replica1 2 0 2 UP 1" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  WAIT=1 run step leave replica1
  [ "$status" -eq 0 ]
  # It waited its WAIT=1 s at least (more on a loaded machine).
  [[ "$output" =~ "@@left replica1 "([0-9]+)" open=2+1" ]] && [ "${BASH_REMATCH[1]}" -ge 1 ]
  [ -e state/left/replica1 ]
}

@test "leave with fleet.drainPolicy halt: past its wait with requests open, the replica is put back as it was and the step exits 9, unmarked" {
  servers_are "replica1 2 0 2 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  HALT=yes WAIT=1 run step leave replica1
  [ "$status" -eq 9 ]
  [[ "$output" =~ "@@halted replica1 "([0-9]+)" open=2+0" ]] && [ "${BASH_REMATCH[1]}" -ge 1 ]
  grep -qx "set server sglang/replica1 state drain" api.log
  [ "$(tail -n 1 < <(grep '^set server' api.log))" = "set server sglang/replica1 state ready" ]
  [ ! -e state/left/replica1 ]
}

@test "leave with fleet.drainPolicy halt: a replica that did not serve before stays as it was (not put in)" {
  servers_are "replica1 0 0 2 DOWN" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  HALT=yes WAIT=1 run step leave replica1
  [ "$status" -eq 9 ]
  ! grep -q "state ready" api.log
}

@test "leave: a replica that serves nothing leaves without the minHealthy check" {
  servers_are "replica1 0 0 0 DOWN" "replica2 0 0 0 DOWN" "replica3 0 0 0 DOWN"
  run step leave replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state drain" api.log
}

@test "rejoin: ready, then waits until the check passes" {
  servers_are "replica1 0 0 0 DOWN" "replica2 2 0 0 UP"
  printf '%s\n' "replica1 0 0 0 DOWN" "replica2 2 0 0 UP" "replica1 2 0 0 UP" "replica2 2 0 0 UP" >next-servers
  run step rejoin replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state ready" api.log
  [[ "$output" == *"@@joined replica1 "* ]]
  [ "$(grep -c '^show stat' api.log)" -ge 2 ]
}

@test "rejoin: a check that never passes fails the step, saying what HAProxy sees" {
  servers_are "replica1 0 0 0 DOWN" "replica2 2 0 0 UP"
  WAIT=1 run step rejoin replica1
  [ "$status" -eq 8 ]
  [[ "$output" == *"has not passed in 1 s"*"replica1 127.0.0.11:30000 op=0 admin=0"* ]]
}

@test "show: an IPv6 replica's address in brackets, as a URL takes it" {
  ADDRESS_PREFIX=fd00::1 servers_are "replica1 2 0 0 UP"
  run step show
  [ "$status" -eq 0 ]
  mapfile -t lines < <(grep -v '^@@' <<<"$output")
  [ "${lines[0]}" = "replica1 [fd00::11]:30000 op=2 admin=0 scur=0 qcur=0 status=UP check=L7OK" ]
}

@test "leave: HAProxy refusing the drain (an answer in words) fails the step" {
  servers_are "replica1 0 0 0 DOWN" "replica2 2 0 0 UP"
  SET_ANSWER="No such server." run step leave replica1
  [ "$status" -eq 1 ]
  [[ "$output" == *"No such server."*"did not take 'set server sglang/replica1 state drain'"* ]]
}

@test "leave: another leave holding the balancer's lock keeps this one from counting and draining" {
  servers_are "replica1 2 0 0 UP" "replica2 2 0 0 UP" "replica3 2 0 0 UP"
  (flock 9 && touch locked && sleep 5) 9>lock &
  until [ -e locked ]; do sleep 0.01; done
  run step leave replica1
  kill %1 2>/dev/null || true
  [ "$status" -eq 1 ]
  [[ "$output" == *"held the balancer's lock"*"nothing was changed"* ]]
  ! grep -q "^set server" api.log
}

@test "leave and rejoin mark the replica: taken out by a rollout (left/), put in by this stack (joined/); show lists the marks" {
  servers_are "replica1 2 4 0 UP" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  run step leave replica1
  [ "$status" -eq 0 ]
  [ -e state/left/replica1 ]
  servers_are "replica1 2 4 0 UP" "replica2 2 4 0 UP"
  UNIT_HASH=0123abcd run step rejoin replica1
  [ "$status" -eq 0 ]
  [ ! -e state/left/replica1 ] && [ -e state/joined/replica1 ]
  run step show
  # The mark holds what it ran when it joined, and when.
  [[ "$output" =~ "@@joined replica1 0123abcd "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z ]]
  [[ "$output" != *"@@left replica1"* ]]
}

@test "serving: the configuration's disabled bit alone (admin 4) and a slowstart (op 1) count as serving; maintenance and drain do not" {
  servers_are "replica1 1 4 0 UP" "replica2 2 4 0 UP" "replica3 2 5 0 MAINT"
  run step leave replica3
  [ "$status" -eq 0 ]
  [[ "$output" != *"@@others serving"* ]]
  servers_are "replica1 1 4 0 UP" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  run step leave replica3
  [ "$status" -eq 0 ]
  [[ "$output" == *"@@others serving 2: replica1 replica2"* ]]
}

@test "an operator's maintenance is kept: leave and rejoin change nothing of a replica this stack put in and did not take out" {
  mkdir -p state/joined && : >state/joined/replica1
  servers_are "replica1 0 5 0 MAINT" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  run step leave replica1
  [ "$status" -eq 0 ]
  [[ "$output" == *"@@held replica1 MAINT"* ]]
  run step rejoin replica1
  [ "$status" -eq 0 ]
  [[ "$output" == *"@@held replica1 MAINT"* ]]
  ! grep -q "^set server" api.log
  [ ! -e state/left/replica1 ]
}

@test "operatorStates clear: the operator's maintenance is lifted like a rollout's" {
  mkdir -p state/joined && : >state/joined/replica1
  servers_are "replica1 0 5 0 MAINT" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  OPERATOR_STATES=clear run step leave replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state drain" api.log
  servers_are "replica1 2 4 0 UP" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  OPERATOR_STATES=clear run step rejoin replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state ready" api.log
}

@test "a new replica (never put in by this stack) in maintenance is not an operator's hold: it is rolled and put in" {
  servers_are "replica1 0 5 0 MAINT" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  run step leave replica1
  grep -qx "set server sglang/replica1 state drain" api.log
  servers_are "replica1 2 4 0 UP" "replica2 2 4 0 UP" "replica3 2 4 0 UP"
  run step rejoin replica1
  [ "$status" -eq 0 ]
  grep -qx "set server sglang/replica1 state ready" api.log
}

@test "conflicts: another process on the stack's address and port, a wildcard listener, another stack's configuration are named; this stack's own listener is not" {
  printf '%s\n' 'LISTEN 0 4096 127.0.0.9:8080 0.0.0.0:* users:(("sshd",pid=999999,fd=3))' 'LISTEN 0 4096 127.0.0.8:8080 0.0.0.0:* users:(("nginx",pid=999998,fd=3))' 'LISTEN 0 4096 [::]:8080 [::]:*' >ss-lines
  printf 'frontend x\n    bind 127.0.0.9:8080\n' >cfg/other.cfg
  printf 'frontend y\n    bind 127.0.0.9:9090\n' >cfg/third.cfg
  run step show
  [[ "$output" == *"@@conflict 127.0.0.9:8080 is taken by sshd pid 999999"* ]]
  [[ "$output" == *"@@conflict [::]:8080 is taken by a process this host does not name"* ]]
  [[ "$output" == *"@@conflict 127.0.0.9:8080 is configured for the HAProxy of the fleet of stack other"* ]]
  [[ "$output" != *"127.0.0.8"* ]]
  [[ "$output" != *"stack third"* ]]
}

@test "show: the configuration file's hash, as it names it, where the rest of the file still hashes to it; else edited" {
  servers_are "replica1 2 4 0 UP"
  printf 'global\n    description -\nbackend sglang\n' >cfg/s.cfg
  h=$(sha256sum <cfg/s.cfg | awk '{ print $1 }')
  sed -i "s/^    description -$/    description dflash-sglang config sha256:$h/" cfg/s.cfg
  run step show
  [[ "$output" == *"@@config $h"* ]]
  echo '# edited by hand' >>cfg/s.cfg
  run step show
  [[ "$output" == *"@@config edited"* ]]
}
