#!/usr/bin/env bash
# One line per kernel: the md5 of its SASS and its name, over the objects given (default:
# build/kernels/*.o). Two builds whose digests agree run the same machine code, so a change that
# only moves or renames source needs no GPU to show the kernels unchanged:
#   lab/sass-digest.sh > before.txt; (edit, make); lab/sass-digest.sh | diff before.txt -
# CUOBJDUMP: a cuobjdump (the CUDA toolkit's, or the one the `triton` wheel carries).
set -euo pipefail
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump")}
[ -x "$cuobjdump" ] || { echo "sass-digest: no cuobjdump (set CUOBJDUMP)" >&2; exit 2; }
[ $# -gt 0 ] || set -- build/kernels/*.o
for obj in "$@"; do "$cuobjdump" -sass "$obj"; done | python3 -c '
import hashlib, re, sys
name, body, out = None, [], []
def flush():
    if name: out.append("%s  %s" % (hashlib.md5("".join(body).encode()).hexdigest(), name))
for line in sys.stdin:
    m = re.match(r"\s*Function : (\S+)", line)
    if m:
        flush(); name, body = m.group(1), []
    elif name and re.search(r"/\*[0-9a-f]{4,}\*/", line):
        body.append(" ".join(line.split())) # cuobjdump pads its columns to the longest line of the whole dump
flush()
print("\n".join(sorted(out, key=lambda l: l.split()[1])))'
