# (prepared in the twenty-eighth session, not yet run) Flash decode GEMM2 streamed 3.05-3.09 TB/s
# in the gemm files up to 2afce3e (the twenty-sixth session) and 2.79-2.93 since (87 -> 92-94 us
# at 512 rows): a regression, or another machine? One call, x 3 rounds alternating: the default
# build, the plain item order (-DMM_GEMM_BAND=0), no give-up check in the producer
# (-DMM_GEMM_GIVE_UP=0), and 2afce3e's own tree. Carry it:
#   rm -rf build/old-2afce3e && mkdir -p build/old-2afce3e &&
#   git archive 2afce3e Makefile src kernels configs | tar x -C build/old-2afce3e
#   run(carry=[".deps", "build/old-2afce3e"])
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
[ -f build/old-2afce3e/Makefile ] || { echo "build/old-2afce3e not carried"; exit 1; }
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
(cd build/old-2afce3e && make -j8 $C GIT_REV=2afce3e build/megamoe > $OUT/build-old.log 2>&1) &
for v in band0:-DMM_GEMM_BAND=0 giveup0:-DMM_GEMM_GIVE_UP=0; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/gemm.o build/$b/megamoe
  make $C BUILD=build/$b NVEXTRA=$f build/$b/megamoe > $OUT/build-$b.log 2>&1 || { tail -20 $OUT/build-$b.log; exit 1; }
done
wait
[ -x build/old-2afce3e/build/megamoe ] || { tail -20 $OUT/build-old.log; exit 1; }
echo "builds $((SECONDS-t0)) s"
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
{
for round in 1 2 3; do
  for b in default band0 giveup0 old; do
    bin=build/megamoe; [ $b = band0 ] && bin=build/band0/megamoe; [ $b = giveup0 ] && bin=build/giveup0/megamoe
    [ $b = old ] && bin=build/old-2afce3e/build/megamoe
    echo "== round $round $b flash"; timeout 60 $mpi $bin gemm $F --rows 8,64,512 --iters 30 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 60 $mpi $bin gemm $P --rows 64,512 --iters 30 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
