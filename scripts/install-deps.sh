#!/usr/bin/env bash
# Installs what megamoe builds against, from Debian/Ubuntu packages, when run as root; otherwise
# prints exactly what is missing and how to point the Makefile at it. Idempotent: with everything
# present it changes nothing.
#   scripts/install-deps.sh          build and run: Open MPI, cJSON
#   scripts/install-deps.sh --test   also the CPU tests: cmocka, clang (libFuzzer), matplotlib
# The CUDA toolkit (>= 12.8) and NCCL (>= 2.28) are not installed here: point CUDA_HOME and
# NCCL_HOME at them.
set -u
want_test=0
[ "${1:-}" = "--test" ] && want_test=1
cjson_home=${CJSON_HOME:-/usr}
missing=()
command -v mpicc >/dev/null 2>&1 || missing+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
[ -f "$cjson_home/include/cjson/cJSON.h" ] || missing+=(libcjson-dev)
if [ "$want_test" = 1 ]; then
    [ -f /usr/include/cmocka.h ] || missing+=(libcmocka-dev)
    command -v clang >/dev/null 2>&1 || missing+=(clang)
    ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || missing+=(libclang-rt-dev)
    /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || missing+=(python3-matplotlib)
fi
cuda_home=${CUDA_HOME:-/usr/local/cuda}
[ -x "$cuda_home/bin/nvcc" ] || echo "install-deps: note: no nvcc under $cuda_home (set CUDA_HOME to the CUDA toolkit, >= 12.8)" >&2
[ -f "$cuda_home/include/nccl.h" ] || [ -f "${NCCL_HOME:-/usr}/include/nccl.h" ] ||
    echo "install-deps: note: no nccl.h under $cuda_home or ${NCCL_HOME:-/usr} (set NCCL_HOME, NCCL >= 2.28)" >&2
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq "${missing[@]}"; } || exit 2
    exit 0
fi
echo "install-deps: missing packages: ${missing[*]}" >&2
echo "  as root: apt-get install ${missing[*]}" >&2
echo "  or build them yourself and point the Makefile at them: make MPI_HOME=/prefix CJSON_HOME=/prefix" >&2
exit 2
