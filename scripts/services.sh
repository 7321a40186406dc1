# shellcheck shell=bash
# Sourced by scripts/test.sh, scripts/demo.sh and .ci/run: puts Node >= 22 on PATH, installs
# dependencies and brings up the services the project needs (Temporal dev server; PostgreSQL for
# the tests).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/node.sh
source "$ROOT/scripts/node.sh"
ensure_node

ensure_node_modules() {
  if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
    echo "turnkit: installing dependencies (npm ci)…"
    npm ci --no-audit --no-fund
  fi
}

# Exports TEMPORAL_ADDRESS etc. and whose server it is (TURNKIT_TEMPORAL_ORIGIN): `started` (just
# now), `checkout` (started by this checkout earlier) or `other` (a server this checkout did not start).
ensure_temporal() {
  local before
  before=$(./temporal-dev.sh status 2>/dev/null || true)
  ./temporal-dev.sh start
  eval "$(./temporal-dev.sh env)"
  export TEMPORAL_ADDRESS TEMPORAL_NAMESPACE TEMPORAL_UI_URL
  case "$before" in
    *"not started by this checkout"*) TURNKIT_TEMPORAL_ORIGIN=other ;;
    *running*) TURNKIT_TEMPORAL_ORIGIN=checkout ;;
    *) TURNKIT_TEMPORAL_ORIGIN=started ;;
  esac
  if [[ "$TURNKIT_TEMPORAL_ORIGIN" == started ]]; then TURNKIT_STARTED_TEMPORAL=1; else TURNKIT_STARTED_TEMPORAL=0; fi
  export TURNKIT_STARTED_TEMPORAL TURNKIT_TEMPORAL_ORIGIN
}

pg_answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -h 127.0.0.1 -p 5432 -q
  else
    psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1
  fi
}

# Makes PostgreSQL answer (starting the local cluster if it is installed but stopped) and
# creates the test database. In CI a missing PostgreSQL is an error; elsewhere a warning.
ensure_postgres() {
  export TURNKIT_TEST_DATABASE_URL="${TURNKIT_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/turnkit_test}"
  if ! pg_answers && command -v pg_ctlcluster >/dev/null 2>&1 && [[ -d /etc/postgresql ]]; then
    echo "turnkit: starting the local PostgreSQL cluster…"
    local versions=(/etc/postgresql/*/)
    versions=("${versions[0]%/}")
    pg_ctlcluster --skip-systemctl-redirect "${versions[0]##*/}" main start || true
    for _ in $(seq 1 30); do pg_answers && break; sleep 1; done
  fi
  if ! pg_answers; then
    if [[ "${CI:-}" == "true" ]]; then
      echo "turnkit: PostgreSQL does not answer on 127.0.0.1:5432 and CI never skips its suites" >&2
      return 1
    fi
    echo "turnkit: WARNING: PostgreSQL does not answer on 127.0.0.1:5432 — its suites will be skipped." >&2
    echo "turnkit: start PostgreSQL (or set TURNKIT_TEST_DATABASE_URL) to run them." >&2
    return 0
  fi
  local db=${TURNKIT_TEST_DATABASE_URL##*/}
  if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname='$db'" | grep -q 1; then
    psql -h 127.0.0.1 -U postgres -d postgres -qc "create database \"$db\"" >/dev/null
  fi
}
