#!/usr/bin/env bash
# `npm run bench`: on Node >= 22 (provisioned if need be), with the dev server up, runs the
# benchmarks; each writes its keys into bench-results.json.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
ensure_postgres
echo "turnkit: benchmarks on Node $(node -v)"
npm run build # the compiled package and its prebuilt workflow bundles (bench/worker-start-bench.ts)
npx tsx bench/turn-bench.ts # first: it starts bench-results.json afresh, the others merge into it
npx tsx bench/turn-store-bench.ts
npx tsx bench/worker-start-bench.ts
npx tsx bench/cancel-bench.ts
npx tsx bench/approval-bench.ts
npx tsx bench/mcp-task-bench.ts
npx tsx bench/post-bench.ts
BENCH_CANCEL_DELIVERY=heartbeat npx tsx bench/cancel-bench.ts
npx tsx bench/long-conversation-bench.ts
npx tsx bench/recovery-bench.ts
npx tsx bench/stream-bench.ts
npx tsx bench/gateway-bench.ts
npx tsx bench/prompt-cache-bench.ts
npx tsx bench/failover-bench.ts
npx tsx bench/codec-bench.ts
# The comparison with @temporalio/ai-sdk: its own package (it pins @temporalio/* 1.23.0).
if [[ ! -d bench/peer-ai-sdk/node_modules || bench/peer-ai-sdk/package-lock.json -nt bench/peer-ai-sdk/node_modules/.package-lock.json ]]; then
  (cd bench/peer-ai-sdk && npm ci --no-audit --no-fund)
fi
npx tsx bench/peer-bench.ts
