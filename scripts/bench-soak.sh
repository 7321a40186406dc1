#!/usr/bin/env bash
# `npm run bench:soak`: on Node >= 22 (provisioned if need be), with the dev server and
# PostgreSQL up, runs bench/soak-bench.ts (SOAK_TURNS, default 1,000; SOAK_BACKENDS, default
# postgres,sqlite); its keys go into bench-results.json.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
ensure_postgres
echo "turnkit: soak benchmark on Node $(node -v)"
npx tsx bench/soak-bench.ts
