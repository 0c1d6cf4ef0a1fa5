#!/usr/bin/env bash
# On the device machine (its CUDA toolkit has cuobjdump; this machine's has none): the SASS of the
# kernels whose demangled names contain PATTERN (default lean_gemv_kernel), from the carried
# deepinfer binary, xz-compressed into $OUT/sass_<pattern>.txt.xz with a per-kernel instruction
# count on stdout — what the instruction-count tuning of a kernel's inner loop reads back here
# (docs/cuda.md "Session 44").
# Usage (device tool, .carry/ carried): PATTERN=lean_gemv_kernel bash tools/device/sass_dump.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
bash tools/device/unpack.sh
PATTERN="${PATTERN:-lean_gemv_kernel}"
CUOBJDUMP="$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)"
"$CUOBJDUMP" -sass .carry/bin/deepinfer | python3 -c '
import lzma, re, subprocess, sys
pattern, out = sys.argv[1], sys.argv[2]
keep, name, count, counts = [], None, 0, []
def flush():
    if name is not None:
        counts.append((name, count))
for line in sys.stdin:
    m = re.match(r"\s*Function : (\S+)", line)
    if m:
        flush()
        dem = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
        name, count = (dem if pattern in dem else None), 0
        if name is not None:
            keep.append("Function : " + dem + "\n")
        continue
    if name is not None:
        keep.append(line)
        if re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+\S", line):
            count += 1
flush()
with lzma.open(out, "wt") as f:
    f.writelines(keep)
for n, c in counts:
    print(f"{c:6d}  {n[:160]}")
' "$PATTERN" "$OUT/sass_${PATTERN}.txt.xz"
