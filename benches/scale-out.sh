#!/usr/bin/env bash
# Throughput of `host serve --stateless` behind a real load balancer
# (HAProxy, Debian's package), with one, two and three replicas, each
# replica pinned to a core (round robin over the machine's cores); the load
# balancer and the client share the cores.
#
#   apt-get install haproxy && bash benches/scale-out.sh [SECONDS]
#
# Prints calls/s and p50/p99 at 1, 8 and 64 connections for: one replica
# directly, then one, two and three replicas behind HAProxy.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3}
command -v haproxy >/dev/null || { echo "haproxy is not installed (apt-get install haproxy)" >&2; exit 1; }
cargo xtask plugins >/dev/null
cargo bench -p toolhost-cli --bench mcp --no-run 2>/dev/null
bench=$(ls -t target/release/deps/mcp-* | grep -v '\.d$' | head -1)
host=target/release/host
work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

replica() { # core port
  taskset -c "$1" "$host" --plugins target/plugins --cache-dir target/bench-cache --no-watch \
    serve --listen "127.0.0.1:$2" --stateless 2>"$work/replica-$2.log" &
  pids+=($!)
}
balancer() { # port backends...
  local port=$1; shift
  {
    echo "global"; echo "  maxconn 4096"
    echo "defaults"; echo "  mode http"; echo "  timeout connect 5s"; echo "  timeout client 60s"; echo "  timeout server 60s"
    echo "  option http-keep-alive"
    echo "frontend mcp"; echo "  bind 127.0.0.1:$port"; echo "  default_backend replicas"
    echo "backend replicas"; echo "  balance roundrobin"; echo "  http-reuse always"
    local n=0
    for b in "$@"; do echo "  server r$n $b"; n=$((n+1)); done
  } >"$work/haproxy-$port.cfg"
  haproxy -f "$work/haproxy-$port.cfg" -db >"$work/haproxy-$port.log" 2>&1 &
  pids+=($!)
}

cores=$(nproc)
replica 0 18101
replica $((1 % cores)) 18102
replica $((2 % cores)) 18103
balancer 18200 127.0.0.1:18101
balancer 18201 127.0.0.1:18101 127.0.0.1:18102
balancer 18202 127.0.0.1:18101 127.0.0.1:18102 127.0.0.1:18103
sleep 2
echo "== one replica, direct"; "$bench" --load 127.0.0.1:18101 --seconds "$seconds"
echo "== one replica behind HAProxy"; "$bench" --load 127.0.0.1:18200 --seconds "$seconds"
echo "== two replicas behind HAProxy"; "$bench" --load 127.0.0.1:18201 --seconds "$seconds"
echo "== three replicas behind HAProxy ($cores cores)"; "$bench" --load 127.0.0.1:18202 --seconds "$seconds"
