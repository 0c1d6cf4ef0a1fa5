set -uo pipefail
bash tools/device/unpack.sh
export LD_LIBRARY_PATH="$PWD/.carry/lib"
export DEEPINFER_SOURCE_DIR="$PWD" DEEPINFER_TEST_MODELS_DIR=/tmp/tm DEEPINFER_CACHE_DIR=/tmp/dc
timeout 90 .carry/bin/cuda_ops_test --gtest_filter='*Moe*:*Linear*:*Gemm*' > $OUT/moe_test.txt 2>&1
rc=$?; echo "moe test rc=$rc"; grep -E "OK \]|FAILED|Failure|Expected|Which is|tokens," $OUT/moe_test.txt | head -30
if [ $rc -eq 0 ]; then
  OUT=/tmp/ab CONFIGS='-|DEEPINFER_GEMM_PACKED_EXPERTS=0|-|DEEPINFER_GEMM_PACKED_EXPERTS=0' BATCHES=512 PREFILL=8192 timeout 150 bash tools/bench/ab_on_device.sh
fi
true
