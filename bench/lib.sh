# Sourced by the bench scripts. tarmac_serve LOG ARGS...: starts `$BIN serve ARGS... --port 0`
# in the background, waits until it is ready, and sets SERVE_PID and SERVE_PORT; exits 1 with
# the log when it does not start within 30 s.
tarmac_serve() {
  local log=$1
  shift
  $BIN serve "$@" --port 0 >"$log" 2>&1 &
  SERVE_PID=$!
  SERVE_PORT=""
  for _ in $(seq 300); do
    SERVE_PORT=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
    [[ -n $SERVE_PORT ]] && grep -q "ready" "$log" && return 0
    sleep 0.1
  done
  echo "server did not start" >&2
  cat "$log" >&2
  kill "$SERVE_PID" 2>/dev/null || true
  exit 1
}
