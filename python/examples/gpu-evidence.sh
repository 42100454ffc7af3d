#!/usr/bin/env bash
# GPU evidence for docs/bridge.md: `examples/gpu-evidence.sh none hadamard random-hadamard ddp`.
# Single-GPU modes train the 1.1B Llama in emulated MXFP4 with that rotation; `ddp` runs two ranks
# under torchrun and checks the reduction. Figures land in $OUT (or /tmp/mxscope-evidence).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/mxscope-evidence}
budget=${BUDGET:-170}
mkdir -p "$out"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "gpus", torch.cuda.device_count(), torch.cuda.get_device_name(0))'
for mode in "$@"; do
  echo "=== $mode"
  if [ "$mode" = ddp ]; then
    torchrun --nproc_per_node=2 examples/llama_mxfp4.py --ddp --check-reduction --rotation hadamard --steps 300 \
      --time-budget "$budget" --out /tmp/mxscope-runs --results "$out/ddp.json" >"$out/ddp.log" 2>&1
  else
    CUDA_VISIBLE_DEVICES=0 python3 examples/llama_mxfp4.py --rotation "$mode" --steps 300 --time-budget "$budget" \
      --out /tmp/mxscope-runs --results "$out/$mode.json" >"$out/$mode.log" 2>&1
  fi
  echo "exit $?"
  grep -E '^(RESULTS|REDUCTION)|Error|error' "$out/$mode.log" | cut -c1-1500 | tail -n 8
  if [ "$mode" = hadamard ] && [ -f "$out/hadamard.json" ]; then
    run_dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runDir"])' "$out/hadamard.json")
    gzip -c "$run_dir/telemetry.ndjson" >"$out/hadamard-telemetry.ndjson.gz"
  fi
done
