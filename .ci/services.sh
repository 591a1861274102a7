# Real Prometheus and InfluxDB for the exporter tests (tests/test_prometheus.py,
# tests/test_influx.py), on loopback, with temporary data directories.
#
#   . .ci/services.sh start    # install if missing, start both, export TUIMETER_TEST_*
#   . .ci/services.sh stop     # stop both, remove the temporary directory
#
# Source it (the tests read the exported variables). No systemd: the binaries run in the
# background with pid files. A server that cannot be installed or started is reported and
# left out; its tests then skip and say which variable is missing.
#
# Exported for the tests:
#   TUIMETER_TEST_PROMETHEUS_URL          http://127.0.0.1:PORT
#   TUIMETER_TEST_PROMETHEUS_TARGETS_DIR  file_sd folder: a test drops NAME.json there
#   TUIMETER_TEST_INFLUX_URL              http://127.0.0.1:PORT (1.x API)
#   TUIMETER_TEST_INFLUXD                 the influxd binary
#   TUIMETER_TEST_INFLUX_CONFIG           its config (to start it again after a stop)
#   TUIMETER_TEST_INFLUX_PIDFILE          its pid (the restart test rewrites it)

_tm_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _tm_wait_http URL CODE SECONDS: poll until URL answers with CODE
_tm_wait_http() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys, time, urllib.request, urllib.error
url, code, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == code:
                sys.exit(0)
    except (OSError, urllib.error.URLError):
        pass
    time.sleep(0.2)
sys.exit(1)
PY
}

_tm_install() {
    local missing=()
    command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 \
        || missing+=(prometheus)  # promtool (tests/test_promtool.py) ships with it
    command -v influxd >/dev/null 2>&1 || missing+=(influxdb)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "services: ${missing[*]} not installed (needs root and apt-get)" >&2
        return 0
    fi
    echo "services: installing ${missing[*]}" >&2
    # the packages ship systemd units; keep their post-install scripts from starting them
    local policy=/usr/sbin/policy-rc.d added_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added_policy=1
    fi
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}"; } >/tmp/tuimeter-services-apt.log 2>&1 \
        || echo "services: apt-get install ${missing[*]} failed (see /tmp/tuimeter-services-apt.log)" >&2
    [ -n "$added_policy" ] && rm -f "$policy"
    return 0
}

_tm_start_prometheus() {
    command -v prometheus >/dev/null 2>&1 || return 0
    local dir="$TUIMETER_SERVICES_DIR/prometheus" port
    port=$(_tm_free_port)
    mkdir -p "$dir/data" "$dir/targets"
    cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 10s
scrape_configs:
  - job_name: tuimeter-test
    scrape_interval: 1s
    scrape_timeout: 1s
    file_sd_configs:
      - files: ['$dir/targets/*.json']
        refresh_interval: 1s
EOF
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
        --web.listen-address="127.0.0.1:$port" --web.enable-lifecycle \
        --storage.tsdb.retention.time=1d --log.level=warn >"$dir/log" 2>&1 &
    echo $! >"$dir/pid"
    if _tm_wait_http "http://127.0.0.1:$port/-/ready" 200 60; then
        export TUIMETER_TEST_PROMETHEUS_URL="http://127.0.0.1:$port"
        export TUIMETER_TEST_PROMETHEUS_TARGETS_DIR="$dir/targets"
        echo "services: prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') on $TUIMETER_TEST_PROMETHEUS_URL" >&2
    else
        echo "services: prometheus did not start; its log:" >&2
        tail -n 20 "$dir/log" >&2
    fi
}

_tm_start_influx() {
    command -v influxd >/dev/null 2>&1 || return 0
    local dir="$TUIMETER_SERVICES_DIR/influxdb" port rpc
    port=$(_tm_free_port)
    rpc=$(_tm_free_port)
    mkdir -p "$dir"
    cat >"$dir/influxdb.conf" <<EOF
reporting-disabled = true
bind-address = "127.0.0.1:$rpc"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:$port"
  log-enabled = false
[logging]
  level = "warn"
EOF
    influxd -config "$dir/influxdb.conf" >>"$dir/log" 2>&1 &
    echo $! >"$dir/pid"
    if _tm_wait_http "http://127.0.0.1:$port/ping" 204 60; then
        export TUIMETER_TEST_INFLUX_URL="http://127.0.0.1:$port"
        export TUIMETER_TEST_INFLUXD="$(command -v influxd)"
        export TUIMETER_TEST_INFLUX_CONFIG="$dir/influxdb.conf"
        export TUIMETER_TEST_INFLUX_PIDFILE="$dir/pid"
        export TUIMETER_TEST_INFLUX_LOG="$dir/log"
        echo "services: influxdb $(influxd version 2>/dev/null | awk '{print $2}') on $TUIMETER_TEST_INFLUX_URL" >&2
    else
        echo "services: influxd did not start; its log:" >&2
        tail -n 20 "$dir/log" >&2
    fi
}

_tm_stop_pidfile() {
    local pidfile=$1 pid i
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do  # up to 10 s for a clean shutdown
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
}

tuimeter_services_start() {
    _tm_install
    export TUIMETER_SERVICES_DIR
    TUIMETER_SERVICES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tuimeter-services.XXXXXX")
    _tm_start_prometheus
    _tm_start_influx
    return 0
}

tuimeter_services_stop() {
    [ -n "${TUIMETER_SERVICES_DIR:-}" ] && [ -d "$TUIMETER_SERVICES_DIR" ] || return 0
    _tm_stop_pidfile "$TUIMETER_SERVICES_DIR/prometheus/pid"
    _tm_stop_pidfile "$TUIMETER_SERVICES_DIR/influxdb/pid"
    rm -rf "$TUIMETER_SERVICES_DIR"
    unset TUIMETER_SERVICES_DIR TUIMETER_TEST_PROMETHEUS_URL TUIMETER_TEST_PROMETHEUS_TARGETS_DIR \
        TUIMETER_TEST_INFLUX_URL TUIMETER_TEST_INFLUXD TUIMETER_TEST_INFLUX_CONFIG \
        TUIMETER_TEST_INFLUX_PIDFILE TUIMETER_TEST_INFLUX_LOG
    return 0
}

case "${1:-}" in
    start) tuimeter_services_start ;;
    stop) tuimeter_services_stop ;;
    "") ;;  # sourced for the functions only
    *) echo "usage: . .ci/services.sh start|stop" >&2 ;;
esac
