#!/usr/bin/env bash
# Three release cairn-server nodes behind nutcracker (ketama); redis-benchmark SET/GET through
# the proxy against one node directly. Prints requests/s.
set -u
S=/work/bench-target/release/cairn-server
D=$(mktemp -d /tmp/proxybench.XXXX)
pids=()
for i in 1 2 3; do
  $S --engine db --dir $D/n$i --port $((7400+i)) --sync never > $D/n$i.log 2>&1 &
  pids+=($!)
done
cat > $D/nutcracker.yml <<YML
cairn:
  listen: 127.0.0.1:7400
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  servers:
   - 127.0.0.1:7401:1 n1
   - 127.0.0.1:7402:1 n2
   - 127.0.0.1:7403:1 n3
YML
nutcracker -c $D/nutcracker.yml > $D/nc.log 2>&1 &
pids+=($!)
sleep 1
for P in 1 16; do
  for target in 7400 7401; do
    echo "== port $target (7400 = proxy, 7401 = one node) -P $P"
    redis-benchmark -p $target -t set,get -n 200000 -c 50 -d 100 -r 1000000 -P $P -q 2>&1 | grep -v "^$" | tr '\r' '\n' | grep "requests per second"
  done
done
kill ${pids[@]} 2>/dev/null; wait 2>/dev/null
rm -rf $D
