# Thirty-second session, call 6 (one H200): what a Pro expert's last tiles cost in the wide form.
# 49152 / 52224 / 55296 rows = 1024 / 1088 / 1152 an expert = 5 x 192 + a 64-row narrow tile /
# 5 x 192 + a 128-row tile (two math warpgroups) / 6 x 192, x 3 in one call. If a 128-row tile
# costs ~2/3 of a full one and the narrow ~1/2, splitting 1024 as 4 x 192 + 2 x 128 would gain.
set -u
. scripts/lab.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1" B=build/megamoe
for i in 1 2 3; do
  $mpi $B gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 49152,52224,55296 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] " | sed "s/^/pro $i /"
done | tee $OUT/pro-last-tiles.txt | awk '{print $1,$2,$3,$4,$11,$12,$18}'
