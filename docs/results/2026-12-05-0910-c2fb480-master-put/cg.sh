#!/bin/bash
# cg.sh MASTER OUT: callgrind of MASTER serving put,get of 100000 objects
B=/work/wt/masterput/build-prof/tools/kvforge-bench
P=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file=$2 --toggle-collect=kvf_service_handle $1 --rpc_port $P --enable_metric_reporting=false >$2.log 2>&1 & MP=$!
for i in $(seq 40); do sleep 0.5; $B --master 127.0.0.1:$P --objects 100000 --rounds 1 --phases put,get --connections 1 --depth 8 --json >$2.json 2>/dev/null && break; done
kill -INT $MP; wait $MP
callgrind_annotate --inclusive=yes $2 2>/dev/null | grep -E "service.c:(do_put_start|do_get|do_finish|answer_replicas) |put.c:kvf_batch_put_(start|end) |get.c:kvf_batch_get |kvf_msg_enc_replicas_vec " | awk '{gsub(",","",$1); printf "%s %.1f\n", $NF=="" ? $2 : $(NF-1), $1/100000}'
