#!/usr/bin/env bash
# One call on one GPU for quant-chains.patch: the quantizer (every mode's recipe step 2, fused's
# dispatch above all) with each block's scale divided without a call (mm_div_fp8_max: the product
# by fl(1/448) and one FMA correction, equal to the division for every float from the scale floor
# up, test_recipe.c) and one multiply test for all U blocks of a warp, so the U blocks' tails
# interleave (the SASS before: after the amax reductions, each block's division with its range
# check and call, its multiply test and its conversions in branch regions one after another).
# Here, before the call:
#   lab/ab.sh prepare HEAD && git apply lab/pending/quant-chains.patch
# then from the repository root with .deps and build/ab-old carried, $OUT set by the runner and
# GIT_REV=<HEAD>+quant in the environment. lab/ab.sh runs `check` of the new build (fused equals
# ll bit for bit, every path against the references), then the Flash EP8 slice, old and new
# alternated, with the stages. Predicted (H100, Flash EP8 slice): the dispatch stage at 4096
# tokens ~137 -> ~115 us (its quantization ~51 us: lab/ablations/dispatch.txt), fused's whole
# call ~1% faster there, 1-64 tokens unchanged; normal's quant-layout stage a little faster.
# The patch lands with a docs/performance.md row if the dispatch stage gains and nothing else
# loses, else it is dropped with its row; this script and the patch go either way.
set -u
: "${OUT:?set OUT to the output folder}"
export GIT_REV=${GIT_REV:-unknown}
grep -q mm_div_fp8_max kernels/recipe.h || { echo "apply lab/pending/quant-chains.patch first"; exit 2; }
[ -f build/ab-old/Makefile ] || { echo "run lab/ab.sh prepare HEAD and carry build/ab-old"; exit 2; }
logs=/tmp/quant-chains-$$ # few files come back one by one: the folder stays here, its archive goes
timeout "${CALL_S:-500}" lab/ab.sh run "$logs" --configs deepseek-v4-flash --bench-extra "--ep-slice 8" \
    --modes fused,normal --batches 1,64,512,4096 --rounds 2 --iters 20
cp "$logs/ab.tgz" "$logs/summary.txt" "$OUT/"
cat "$logs/summary.txt"
