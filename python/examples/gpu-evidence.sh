#!/usr/bin/env bash
# GPU evidence for docs/bridge.md: `examples/gpu-evidence.sh none hadamard random-hadamard ddp fsdp`.
# Single-GPU modes train the 1.1B Llama in emulated MXFP4 with that rotation; `ddp` and `fsdp` run two
# ranks under torchrun (DistributedDataParallel, or FSDP2 fully_shard) and check the reduction; `tp`
# observes a column- then row-parallel Linear pair on two ranks and unsharded on one GPU (tp_pair.py).
# Figures land in $OUT (or /tmp/mxscope-evidence). STEPS and BUDGET (seconds per mode) scale each run;
# LAYER_GROUPS (default 1) passes --stats-layer-groups to the llama runs; BATCH and SEQ (default 4 and
# 512) are each rank's sequences per step and their length. Modes ending in -rank (ddp-observe-rank,
# fsdp-observe-rank, ...) run with --wgrad-error-scope rank: each rank's own Wgrad error. A mode named
# again (an A/B/A/B on one machine start) writes NAME-2.json/.log, NAME-3…, instead of overwriting.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/mxscope-evidence}
budget=${BUDGET:-170}
steps=${STEPS:-300}
groups=${LAYER_GROUPS:-1}
shape=(--batch "${BATCH:-4}" --seq "${SEQ:-512}")
mkdir -p "$out"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "gpus", torch.cuda.device_count(), torch.cuda.get_device_name(0))'
for mode in "$@"; do
  name=$mode n=1
  while [ -e "$out/$name.log" ]; do n=$((n + 1)); name=$mode-$n; done
  echo "=== $name"
  observe=""; [[ $mode == *-observe* ]] && observe=--observe
  scope=batch
  if [[ $mode == *-rank ]]; then
    scope=rank
    [[ $mode =~ ^(ddp|fsdp)(-observe)?-rank$ ]] || { echo "$mode: -rank is for the ddp and fsdp modes"; continue; }
  fi
  case ${mode%-rank} in
    ddp | fsdp | ddp-observe | fsdp-observe)  # -observe: bf16 with hooks only, against plain bf16
      parallel=${mode%%-*}
      torchrun --nproc_per_node=2 examples/llama_mxfp4.py "--$parallel" $observe --check-reduction --rotation hadamard --steps "$steps" --stats-layer-groups "$groups" \
        --wgrad-error-scope "$scope" "${shape[@]}" \
        --time-budget "$budget" --out /tmp/mxscope-runs --results "$out/$name.json" >"$out/$name.log" 2>&1 ;;
    tp)
      CUDA_VISIBLE_DEVICES=0 python3 examples/tp_pair.py --out "$out/tp-single.ndjson" >"$out/tp-single.log" 2>&1
      torchrun --nproc_per_node=2 examples/tp_pair.py --out "$out/tp-sharded.ndjson" >"$out/tp-sharded.log" 2>&1 ;;
    *)
      CUDA_VISIBLE_DEVICES=0 python3 examples/llama_mxfp4.py --rotation "$mode" --steps "$steps" "${shape[@]}" --time-budget "$budget" \
        --out /tmp/mxscope-runs --results "$out/$name.json" >"$out/$name.log" 2>&1 ;;
  esac
  echo "exit $?"
  logs=("$out/$name.log"); [ "$mode" = tp ] && logs=("$out/tp-single.log" "$out/tp-sharded.log")
  grep -hE '^(RESULTS|REDUCTION|STEP KINDS)|rank 0:|Error|error' "${logs[@]}" | cut -c1-1500 | tail -n 8
  if [ "$mode" = hadamard ] && [ -f "$out/hadamard.json" ]; then
    run_dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runDir"])' "$out/hadamard.json")
    gzip -c "$run_dir/telemetry.ndjson" >"$out/hadamard-telemetry.ndjson.gz"
  fi
done
