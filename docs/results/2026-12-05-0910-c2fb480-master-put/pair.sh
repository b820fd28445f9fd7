#!/bin/bash
# pair.sh A B ROUNDS: interleaved A B / B A runs; prints label put get ratio
B=/work/wt/masterput/build-prof/tools/kvforge-bench
run() {
  P=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  $1 --rpc_port $P --enable_metric_reporting=false >/dev/null 2>&1 & MP=$!
  sleep 0.5
  $B --master 127.0.0.1:$P --objects 200000 --seconds 3 --connections 2 --depth 8 --phases put,get --json 2>/dev/null >/tmp/mp/pair.json
  kill $MP; wait $MP 2>/dev/null
  python3 -c "
import json;d=json.load(open('/tmp/mp/pair.json'))['results'];p=d['put']['keys_per_sec'];g=d['get']['keys_per_sec'];print('$2',round(p/1e6,3),round(g/1e6,3),round(p/g,3),d['batch_put_start']['p50_us'],d['batch_put_end']['p50_us'])"
}
for i in $(seq $3); do
  if [ $((i % 2)) = 1 ]; then run $1 A; run $2 B; else run $2 B; run $1 A; fi
done
