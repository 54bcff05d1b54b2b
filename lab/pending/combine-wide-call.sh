#!/usr/bin/env bash
# One call on one GPU for combine-wide.patch: fused's staged combine in large calls with units of
# up to 4096 columns (mm_combine_chunk_call: Flash's whole row at the EP8 slice's 4096 tokens,
# Pro's in halves; a thread sums up to four 16-byte columns a unit) instead of 1024. At the Flash
# EP8 slice's 4096 tokens (H100) the combine stage took ~173 us against ~111 us of HBM traffic
# (201 MB of rows read, 151 MB of y written at 3.17 TB/s): ~0.9 us a unit of ~1.4 rows of 2 KB,
# the unit's fixed cost (thread 0's placement and copies, the wait, a proxy fence, a barrier),
# not its bytes. Predicted: the stage at 4096 / 8192 tokens ~173 / 330 -> ~125 / ~240 us, fused
# ~3% faster there; calls of fewer than 16 units a warpgroup unchanged (they keep 1024).
# Here, before the call:
#   lab/ab.sh prepare HEAD && git apply lab/pending/combine-wide.patch
# then from the repository root with .deps and build/ab-old carried, $OUT set by the runner and
# GIT_REV=<HEAD>+combine in the environment. lab/ab.sh runs `check` of the new build (84
# scenarios: combine-staged-wide takes the wide units), then the Flash and Pro EP8 slices, old and
# new alternated, with the stages. The patch is independent of the other pending ones (other
# files); applied together, --breakdown's stages still tell their effects apart (dispatch:
# quant-chains, combine: this one; the FP4 decode form moves only FP4 calls).
# The patch lands with a docs/performance.md row if the combine stage gains and nothing loses,
# else it is dropped with its row; this script and the patch go either way.
set -u
: "${OUT:?set OUT to the output folder}"
export GIT_REV=${GIT_REV:-unknown}
grep -q mm_combine_chunk_call kernels/fused_schedule.h || { echo "apply lab/pending/combine-wide.patch first"; exit 2; }
[ -f build/ab-old/Makefile ] || { echo "run lab/ab.sh prepare HEAD and carry build/ab-old"; exit 2; }
logs=/tmp/combine-wide-$$ # few files come back one by one: the folder stays here, its archive goes
timeout "${CALL_S:-560}" lab/ab.sh run "$logs" --bench-extra "--ep-slice 8" --modes fused \
    --batches 512,1024,4096,8192 --rounds 2 --iters 20
cp "$logs/ab.tgz" "$logs/summary.txt" "$OUT/"
cat "$logs/summary.txt"
