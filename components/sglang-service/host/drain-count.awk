# dflash-sglang: SGLang's drain counts, one reading for the transaction's stop (host/transaction.sh
# stop_server). Input: the old server's journal lines; each tokenizer worker's watchdog
# (srt/managers/tokenizer_manager.py sigterm_watchdog) logs every 5 s
#   Gracefully exiting... Remaining number of requests 3. Remaining requests remaining_rids=[...].
# and stops after its line that says 0. Variables: workers (the server's --tokenizer-worker-num,
# 1 when unset) and what: "count" prints the requests still in flight across every worker, or
# nothing while that is unknown (a worker not heard from yet); "drained" prints the time of the
# line at which every worker had said 0: `journalctl -o short-monotonic`'s "[ 1234.567890]"
# (seconds since boot, the transaction's clock: never the wall clock, which can step during a
# drain, issue 60) as 1234.567890, or the first field of any other output (short-unix's).
# With several workers (srt/managers/multi_tokenizer_mixin.py) a request id starts with its
# worker's id (`<pid>_...`), so a line with requests names its worker; a line that says 0 names
# none: it is the last line of the worker not heard from the longest that still had requests
# (each logs on its own 5 s beat), or of a worker that never had any.
function stamp(  t) {
  if ($0 !~ /^\[ *[0-9]+(\.[0-9]+)?\]/) return $1
  t = $0
  sub(/^\[ */, "", t)
  sub(/\].*/, "", t)
  return t
}
{
  line = tolower($0)
  if (!match(line, /remaining number of requests [0-9]+/)) next
  n = substr(line, RSTART + 29, RLENGTH - 29) + 0
  i++
  last = n
  if (workers <= 1) { if (n == 0 && drained == "") drained = stamp(); next }
  if (n > 0) {
    w = "?"
    if (match($0, /remaining_rids=\[['"]?[0-9]+_/)) { w = substr($0, RSTART, RLENGTH); sub(/^remaining_rids=\[['"]?/, "", w); sub(/_$/, "", w) }
    count[w] = n; pos[w] = i; live[w] = 1
    next
  }
  best = ""
  for (k in live) if (live[k] && pos[k] < i && (best == "" || pos[k] < pos[best])) best = k
  if (best != "") { live[best] = 0; count[best] = 0 }
  zeros++
  if (zeros >= workers && drained == "") drained = stamp()
}
END {
  if (i == 0) exit
  if (what == "drained") { if (drained != "") print drained; exit }
  if (workers <= 1) { print last; exit }
  if (zeros >= workers) { print 0; exit }
  s = 0
  for (k in live) if (live[k]) s += count[k]
  if (s > 0) print s
}
