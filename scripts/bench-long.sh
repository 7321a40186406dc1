#!/usr/bin/env bash
# `npm run bench:long`: on Node >= 22 (provisioned if need be), with the dev server up, runs
# bench/long-turn-bench.ts (LONG_TURN_ITERATIONS, default 10,000: it runs for minutes, so it
# is not part of `npm run bench`); its long_turn_* keys go into bench-results.json.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
echo "turnkit: long-turn benchmark on Node $(node -v)"
npx tsx bench/long-turn-bench.ts
