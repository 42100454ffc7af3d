# A/B of the backward worker's queue, processes in turns: the shipped one (2 items) against the one
# bounded-worker.diff makes (8 items, those beyond 2 within 512 MiB of held tensors). Run from the repository root.
here=python/examples/results/h100-2026-11-28b/worker-queue
cp python/mxscope_bridge/backward_worker.py /tmp/depth2.py
git apply -p0 $here/bounded-worker.diff && cp python/mxscope_bridge/backward_worker.py /tmp/bounded8.py
cd python
for code in depth2 bounded8 depth2 bounded8; do
  cp /tmp/$code.py mxscope_bridge/backward_worker.py
  n=1; while [ -e $OUT/$code-$n.log ]; do n=$((n+1)); done
  timeout 150 python3 examples/bench_bridge.py --shapes 8x1024 --layer-groups 1 --row-strides 4 --emulated "" --rounds 4 > $OUT/$code-$n.log 2>&1
  echo "== $code-$n"; grep -E "per-kind median ms|waited|^\| 8192 \| 10 \|.*medians" $OUT/$code-$n.log
done
cp /tmp/depth2.py mxscope_bridge/backward_worker.py
