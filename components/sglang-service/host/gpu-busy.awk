# dflash-sglang: the GPU reading, one place for every reader (the transaction's wait_gpus and its
# recovery, the unit's ExecStartPre wait-gpus-free). Input: `nvidia-smi --query-gpu=index,memory.used
# --format=csv,noheader,nounits` (awk -F', *'); variables gpus (a comma list) and max (MiB). Prints,
# comma-separated, each GPU of gpus that is not free; nothing when all are. A GPU is free only
# when nvidia-smi lists it with a number of MiB at most max: an empty or [N/A] cell, a GPU not
# listed, an error message or no output at all (a failed or hung nvidia-smi) read as busy.
BEGIN { n = split(gpus, g, ","); for (i = 1; i <= n; i++) want[g[i]] = 1 }
($1 in want) { seen[$1] = 1; if ($2 !~ /^[0-9]+$/ || $2 + 0 > max + 0) { printf "%sGPU %s: %s MiB used", sep, $1, $2; sep = ", " } }
END { for (i = 1; i <= n; i++) if (!(g[i] in seen)) { printf "%sGPU %s: not listed by nvidia-smi", sep, g[i]; sep = ", " } }
