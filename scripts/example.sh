#!/usr/bin/env bash
# `npm run example -- examples/<name>.ts`: runs an example on Node >= 22 (provisioned into .node/
# when the machine's is older) against the local Temporal dev server (started if need be).
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
if [[ $# -eq 0 ]]; then
  echo "usage: npm run example -- examples/reviewers.ts" >&2
  exit 2
fi
ensure_node_modules
ensure_temporal >&2
exec npx tsx "$@"
