#!/usr/bin/env bash
# The model factory in one command: render and warp the training drives, train with two DDP
# processes, export to ONNX, check the export against onnxruntime, evaluate on the held-out
# sample drive through opreplay, and onnxruntime on the same frames beside it. Every step prints
# its wall time.
#
#   tools/train/factory.sh [OUT] [--seeds 101-104] [--seconds 2] [--steps 40] [--nproc 2]
#       [--policy-steps 0] [--refresh 10] [--jobs 2] [--augment] [--pad-history P]
#       [--holdout-every N] [--validation-seeds 901-930]
#
# The drives are rendered as raw frames (dataset.py build --raw), --jobs at once; --policy-steps,
# --refresh, --augment, --pad-history and --holdout-every go to train.py (the last N steps train
# the policy alone on the final vision network's hidden states; steps between hidden-state
# refreshes before that; photometric augmentation; full policy queues; the held-out sample
# drive's accuracy every N steps, 0 = never). --validation-seeds renders those seeds (same clip
# length) into OUT/val and has train.py print their vision figures every --holdout-every steps.
#
# Needs torch (tools/venv.sh --models) and a build (build/). OUT defaults to /tmp/factory; the
# rendered drives in OUT/data are reused when rerun with the same seeds and length, and training
# resumes from OUT/run/checkpoint.pt.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=/tmp/factory seeds=101-104 seconds=2 steps=40 nproc=2 policy_steps=0 refresh=10 jobs=2
holdout_every=0 validation_seeds= extra=()
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then out=$1; shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --policy-steps) policy_steps=$2; shift 2 ;;
    --refresh) refresh=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --augment) extra+=(--augment); shift ;;
    --pad-history) extra+=(--pad-history "$2"); shift 2 ;;
    --holdout-every) holdout_every=$2; shift 2 ;;
    --validation-seeds) validation_seeds=$2; shift 2 ;;
    *) echo "factory: unknown option $1" >&2; exit 2 ;;
  esac
done
py=.venv/bin/python3
timed() { local what=$1 t0=$SECONDS; shift; "$@"; echo "factory: $what took $((SECONDS - t0)) s"; }

timed data $py tools/train/dataset.py build --seeds "$seeds" --seconds "$seconds" --out "$out/data" \
  --raw --jobs "$jobs"
if [ -n "$validation_seeds" ]; then
  timed validation-data $py tools/train/dataset.py build --seeds "$validation_seeds" \
    --seconds "$seconds" --out "$out/val" --raw --jobs "$jobs"
  extra+=(--validation "$out/val")
  [ "$holdout_every" -gt 0 ] || extra+=(--holdout-every 100)
fi
if [ "$holdout_every" -gt 0 ]; then
  [ -f "$out/holdout/img.npy" ] || timed holdout-data $py tools/train/dataset.py drive samples/drive "$out/holdout"
  extra+=(--holdout samples/drive --holdout-data "$out/holdout" --holdout-every "$holdout_every")
fi
# `python3 -m torch.distributed.run` is torchrun. Debian's torch 1.13 on Python 3.11 cannot parse
# torchrun's default --redirects/--tee ("0"); naming rank 1's streams works around it.
timed training $py -m torch.distributed.run --standalone --nproc_per_node "$nproc" \
  --redirects 1:1 --tee 1:1 --log_dir "$out/torchrun-logs" \
  tools/train/train.py --data "$out/data" --run "$out/run" --steps "$steps" \
  --policy-steps "$policy_steps" --refresh "$refresh" ${extra[@]+"${extra[@]}"}
timed export $py tools/train/train.py --run "$out/run" --export "$out/models"
first=${seeds%%[-,]*}
timed export-check $py tools/train/check_export.py "$out/models" "$out/data/data_$first"
timed evaluation $py tools/train/evaluate.py --drive samples/drive --replay "$out/replay" --onnxruntime \
  --vision "$out/models/driving_vision_small.onnx" --policy "$out/models/driving_policy_small.onnx" \
  --json "$out/accuracy.json"
