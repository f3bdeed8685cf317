BEGIN { n = split(gpus, g, ","); for (i = 1; i <= n; i++) want[g[i]] = 1 }
($1 in want) { seen[$1] = 1; if ($2 !~ /^[0-9]+$/ || $2 + 0 > max + 0) { printf "%sGPU %s: %s MiB used", sep, $1, $2; sep = ", " } }
END { for (i = 1; i <= n; i++) if (!(g[i] in seen)) { printf "%sGPU %s: not listed by nvidia-smi", sep, g[i]; sep = ", " } }
