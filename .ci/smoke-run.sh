#!/usr/bin/env bash
# The README's first command on this clone: `make run` must set everything
# up, serve the demo and carry the demo's baseline run and the candidate run
# that follows it to a verdict. It runs on a throwaway database, data folder
# and unused ports, and is stopped at the end (SIGTERM, as an operator would).
set -euo pipefail
cd "$(dirname "$0")/.."

free_port() { # the first port from $1 up that nothing listens on
  local p=$1
  while ss -Hltn "sport = :$p" | grep -q .; do p=$((p + 1)); done
  echo "$p"
}
web=$(free_port 18080); ssh=$(free_port 12222); fast=$(free_port 18100); slow=$(free_port $((fast + 1)))
db="accord_smoke_$$"
data=$(mktemp -d)
log="$data/make-run.log"
export DATABASE_URL="postgres://127.0.0.1:5432/$db?sslmode=disable"
admin_url="postgres://127.0.0.1:5432/postgres?sslmode=disable"

cleanup() {
  [ -n "${pid:-}" ] && kill -TERM -- "-$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  psql "$admin_url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$data"
}
trap cleanup EXIT

echo "smoke: make run on 127.0.0.1:$web (demo sshd :$ssh, emulators :$fast,:$slow)"
ACCORD_LISTEN="127.0.0.1:$web" ACCORD_BASE_URL="http://127.0.0.1:$web" ACCORD_DATA_DIR="$data/data" \
  ACCORD_DEMO_SSH_PORT="$ssh" ACCORD_DEMO_EMULATOR_PORTS="$fast,$slow" \
  setsid make run >"$log" 2>&1 </dev/null &
pid=$!

fail() { echo "smoke: $*" >&2; tail -n 40 "$log" >&2; exit 1; }
for _ in $(seq 1 600); do
  grep -q "Accord demo is up" "$log" && break
  kill -0 "$pid" 2>/dev/null || fail "make run stopped before the demo came up"
  sleep 1
done
grep -q "Accord demo is up" "$log" || fail "the demo did not come up within ten minutes"
curl -fsS "http://127.0.0.1:$web/healthz" >/dev/null || fail "/healthz does not answer"
curl -fsS "http://127.0.0.1:$web/signin" | grep -q 'id="email"' || fail "the sign-in page does not render"

# The demo's baseline run goes through SSH, the probe and the gate engine;
# its candidate run (the NVMe-oF path against it) follows once it is judged.
wait_judged() { # $1: the run's label, $2: what to call it
  local state=""
  for _ in $(seq 1 300); do
    state=$(psql "$DATABASE_URL" -qAtc "SELECT state || ' ' || coalesce(verdict, '') FROM runs WHERE label = '$1' ORDER BY id LIMIT 1" 2>/dev/null || true)
    case "$state" in
      "done "?*) echo "smoke: the demo's $2 run is $state"; return 0 ;;
      failed*|cancelled*) fail "the demo's $2 run ended $state" ;;
    esac
    sleep 1
  done
  fail "the demo's $2 run was not judged within five minutes (last state: ${state:-none})"
}
wait_judged "baseline: local NVMe path" baseline
wait_judged "candidate: NVMe-oF path" candidate
