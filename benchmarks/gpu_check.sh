#!/usr/bin/env bash
# The GPU check in one go, for a machine with CUDA (or MPS): the gpu-marked tests, then the
# timings against llama.cpp's GPU build. Writes everything under ${OUT:-gpu-check}/.
#
#   bash benchmarks/gpu_check.sh            # from the repository root, in Ember's venv
#
# Needs a CUDA build of torch (pip install torch --index-url .../cu128) and, for the
# llama.cpp column, CMAKE_ARGS="-DGGML_CUDA=on" pip install llama-cpp-python.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check}
mkdir -p "$out"
python - <<'PY' | tee "$out/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0))
print("mps", torch.backends.mps.is_available())
PY
timeout 1800 python -m pytest -m gpu -q -p no:cacheprovider \
    tests/engine/runners/torch/test_gpu.py 2>&1 | tee "$out/tests.txt"
tests=${PIPESTATUS[0]}
timeout 1800 python benchmarks/bench_gpu.py --repeats 3 --batch 1,4,16 2>&1 | tee "$out/bench.txt"
bench=${PIPESTATUS[0]}
echo "tests exit $tests, bench exit $bench" | tee "$out/status.txt"
exit $(( tests != 0 || bench != 0 ))
