#!/usr/bin/env bash
# The documented benchmark run behind BENCHMARKS.md: every measurement of
# issue 6, one after another on a quiet machine, each output kept in
# results/<date>-<name>.txt. Takes about an hour (the 1M-event drains with
# Watermill and the 5M-row history are most of it).
#
#   cd bench && bash all.sh            # everything
#   cd bench && bash all.sh drain      # one part: write drain latency history inbox
set -euo pipefail
cd "$(dirname "$0")"
day=$(date +%Y-%m-%d)
parts=${*:-write drain latency history inbox}
# Each measurement starts from a checkpointed server, so that the dirty pages
# of the one before (a 1M-row drain leaves a gigabyte) are not written out
# during it.
checkpoint() { psql "${TXBOX_BENCH_PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}" -qc CHECKPOINT >/dev/null 2>&1 || echo "(CHECKPOINT failed; measuring anyway)"; }
run() { local name=$1; shift; checkpoint; echo "== $name: go run . $*"; { echo "# $(date -u +%FT%TZ) go run . $*"; go run . "$@"; } 2>&1 | tee "results/$day-$name.txt"; }
for p in $parts; do
  case $p in
    write)   run write write --runs 6 --duration 8s
             run write-interleave write --interleave --runs 6 --duration 8s --only business,handwritten,handwritten-8col,txbox ;;
    drain)   run drain drain --events 1000000 --aggregates 100000 --runs 3 --batch 1000 --relay-log info ;;
    latency) for i in 1 2 3; do run "latency-$i" latency --rate 500 --rate 2000 --duration 15s --idle 10s; done ;;
    history) run history-postgres history --db "postgres://postgres@127.0.0.1:5432/test?sslmode=disable" --history 5000000 --backlog 100000 --batch 1000 --runs 3 ;;
    inbox)   run inbox inbox --events 30000 --runs 3 ;;
    *) echo "unknown part $p" >&2; exit 2 ;;
  esac
done
