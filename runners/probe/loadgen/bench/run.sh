#!/bin/sh
# Runs the load generator's benchmarks against the emulator (and wrk) and
# prints the median of each figure over COUNT runs (default 5).
#
#   runners/probe/loadgen/bench/run.sh [BENCH_REGEXP]
#
# ACCORD_BENCH_DURATION (default 10s) sets the measured time of the
# fidelity and capacity runs; ACCORD_BENCH_REQUESTS (default 1000000) the
# size of the memory run.
set -eu
cd "$(dirname "$0")/.."
count=${COUNT:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench "${1:-.}" -benchtime 1x -count "$count" -timeout 0 . | tee "$out"
echo
echo "median of $count runs:"
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i + 1 <= NF; i += 2) { key = name " " $(i+1); vals[key] = vals[key] " " $i }
}
END {
	for (key in vals) {
		n = split(vals[key], v, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
		m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		printf "  %-28s %-18s %s\n", substr(key, 1, index(key, " ") - 1), substr(key, index(key, " ") + 1), m
	}
}' "$out" | sort
