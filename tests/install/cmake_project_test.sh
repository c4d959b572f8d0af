#!/usr/bin/env bash
# cmake_project_test.sh PREFIX WORK_DIR
# Configures and builds tests/install/cmake_project (find_package(dlckpt)
# from PREFIX, a C-only project), then runs its dlckpt-API application (XOR)
# and its SCR application (RS) under PREFIX/bin/dlckpt-run with node kills:
# both must end with the failure-free checksum.
set -uo pipefail
prefix=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; [ -f "$work/log" ] && tail -30 "$work/log" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cmake -S "$here/cmake_project" -B "$work/b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/log" 2>&1 || fail "configure against $prefix"
cmake --build "$work/b" >>"$work/log" 2>&1 || fail "build"
nm "$work/b/ckpt_app" | grep ' __wrap_fopen$' >/dev/null || fail "ckpt_app carries no static wrappers"
# A version the package does not have is refused.
mkdir -p "$work/v"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(v C)\nfind_package(dlckpt 9.0 CONFIG REQUIRED)\n' \
  >"$work/v/CMakeLists.txt"
if cmake -S "$work/v" -B "$work/v/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  fail "find_package(dlckpt 9.0) was accepted"
fi
"$here/run_app.sh" "$prefix/bin" "$work/b/ckpt_app" xor -- --iters 10 --sleep-ms 50 || exit 1
"$here/run_app.sh" "$prefix/bin" "$work/b/scr_app" rs -- --iters 10 --sleep-ms 50 || exit 1
echo "cmake_project_test: ok"
