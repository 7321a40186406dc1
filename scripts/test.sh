#!/usr/bin/env bash
# `npm test`: installs what is missing, starts the Temporal dev server and PostgreSQL, runs vitest.
# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"
ensure_node_modules
ensure_temporal
ensure_postgres
echo "turnkit: running the tests on Node $(node -v)"
exec npx vitest run "$@"
