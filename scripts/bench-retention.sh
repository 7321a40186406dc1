#!/usr/bin/env bash
# `npm run bench:retention`: on Node >= 22 (provisioned if need be), with the dev server and
# PostgreSQL up, runs bench/retention-soak.ts: RETENTION_SOAK_TURNS (default 5,000) real turns
# with retention on, on SQLite and PostgreSQL; its retention_soak_* keys go into
# bench-results.json.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
ensure_postgres
echo "turnkit: retention soak on Node $(node -v)"
npx tsx bench/retention-soak.ts
