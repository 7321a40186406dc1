#!/usr/bin/env bash
# `npm run turnkit -- <command>`: the `turnkit` command line from this checkout, on Node >= 22
# (provisioned if need be). An installed package has it as `npx turnkit`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/node.sh
source "$ROOT/scripts/node.sh"
ensure_node >&2
# The hints the commands print name the command as it is run here.
export TURNKIT_CLI_NAME="npm run turnkit --"
exec node --import tsx "$ROOT/src/cli/bin.ts" "$@"
