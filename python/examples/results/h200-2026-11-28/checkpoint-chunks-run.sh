#!/bin/bash
# Checkpoint bench on the GPU host's CPUs: 16 MiB and 8 MiB chunks in turns.
set -u
cd "$(dirname "$0")"
python3 -c "
import lzma,shutil
with lzma.open('node.xz','rb') as f, open('node','wb') as g: shutil.copyfileobj(f,g)
"
chmod +x node
./node --version; nproc; uptime; lscpu | grep -E "Model name|^CPU\(s\)"
for round in 1 2; do
  for size in 16 8; do
    echo "=== round $round, chunks $size MiB"
    ./node --expose-gc bench/ckb$size.js
  done
done
uptime
