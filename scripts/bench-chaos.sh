#!/usr/bin/env bash
# `npm run bench:chaos` (not in CI): on Node >= 22 (provisioned if need be), with the dev server
# and PostgreSQL up, runs bench/chaos.ts: issue 27's chaos workload (CHAOS_RUNS, default 300;
# CHAOS_BACKENDS, default postgres,sqlite); it prints its figures, it writes no results file.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
# A dev server of its own, on a fresh database: the dev server's SQLite file slows as it fills
# (174 MB after a day of runs: 27 ms per history write, against 3 ms fresh), which would
# measure the file and not TurnKit.
export TEMPORAL_PORT="${CHAOS_TEMPORAL_PORT:-17290}"
./temporal-dev.sh stop >/dev/null 2>&1 || true
rm -f ".temporal/dev-$TEMPORAL_PORT.db"
ensure_temporal
trap './temporal-dev.sh stop >/dev/null 2>&1 || true' EXIT
ensure_postgres
npm run build # the workers run the compiled package (dist/), as production workers do
echo "turnkit: chaos benchmark on Node $(node -v), load $(cut -d' ' -f1-3 /proc/loadavg)"
npx tsx bench/chaos.ts
