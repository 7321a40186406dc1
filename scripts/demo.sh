#!/usr/bin/env bash
# `npm run demo`: installs everything, starts the Temporal dev server, runs the demo agent.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
echo "turnkit: Temporal UI at $TEMPORAL_UI_URL"
exec npx tsx examples/demo.ts "$@"
