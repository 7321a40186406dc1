#!/usr/bin/env bash
# `npm run bench:chaos` (not in CI): on Node >= 22 (provisioned if need be), with the dev server
# and PostgreSQL up, runs bench/chaos.ts: issue 27's chaos workload (CHAOS_RUNS, default 300;
# CHAOS_BACKENDS, default postgres,sqlite); it prints its figures, it writes no results file.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
ensure_postgres
echo "turnkit: chaos benchmark on Node $(node -v), load $(cut -d' ' -f1-3 /proc/loadavg)"
npx tsx bench/chaos.ts
