# dflash-sglang: the candidate (one a line on stdin) that a mistyped word (ENVIRON["word"])
# most likely meant, if one is close enough; nothing otherwise. For preflight's "did you mean"
# on a flag of model.extraArgs that the host's SGLang does not list (host/checks.sh): the
# host's --help is read there, where no TypeScript runs. The same rule as closest() in
# simhost/command-line.ts, which the program's own "did you mean"s use: a candidate that
# begins with the word or with which the word begins counts 1, any other its edit distance;
# a candidate is near when that is at most max(2, length/4), or when it shares the word's first
# two thirds (at least 5 characters); the nearest with the fewest edits wins, the first of
# equals. test/components/sglang-service/extra-args-preflight.test.ts holds the two to the
# same answers.
function distance(a, b,    la, lb, i, j, prev, row, cost, best) {
  la = length(a)
  lb = length(b)
  for (j = 0; j <= lb; j++) prev[j] = j
  for (i = 1; i <= la; i++) {
    row[0] = i
    for (j = 1; j <= lb; j++) {
      cost = substr(a, i, 1) == substr(b, j, 1) ? 0 : 1
      best = prev[j] + 1
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1
      if (prev[j - 1] + cost < best) best = prev[j - 1] + cost
      row[j] = best
    }
    for (j = 0; j <= lb; j++) prev[j] = row[j]
  }
  return prev[lb]
}
function shared_prefix(a, b,    i) {
  i = 0
  while (i < length(a) && i < length(b) && substr(a, i + 1, 1) == substr(b, i + 1, 1)) i++
  return i
}
BEGIN {
  word = ENVIRON["word"]
  found = 0
  limit = int(length(word) / 4)
  if (limit < 2) limit = 2
  prefix = int((2 * length(word) + 2) / 3)
  if (prefix < 5) prefix = 5
}
{
  d = (substr($0, 1, length(word)) == word || substr(word, 1, length($0)) == $0) ? 1 : distance(word, $0)
  if (d > limit && shared_prefix(word, $0) < prefix) next
  if (!found || d < best_d) { found = 1; best = $0; best_d = d }
}
END { if (found) print best }
