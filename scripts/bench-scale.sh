#!/usr/bin/env bash
# `npm run bench:scale`: on Node >= 22 (provisioned if need be), with the dev server and
# PostgreSQL up, runs bench/scale-bench.ts: stores of 10,000 and BENCH_SCALE_LARGE (default
# 1,000,000) turns seeded by bulk SQL on SQLite and PostgreSQL (SCALE_BACKENDS), each read
# measured large over small; its scale_* keys go into bench-results.json.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
ensure_postgres
echo "turnkit: scale benchmark on Node $(node -v) (large store: ${BENCH_SCALE_LARGE:-1000000} turns)"
npx tsx bench/scale-bench.ts
# The per-step costs: a budget check, and a real turn in a conversation of 20,000 turns.
npx tsx bench/scale-store-bench.ts
