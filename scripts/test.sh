#!/bin/sh
# test.sh - the README's second command, and all that CI runs: install what is missing,
# build with -Werror in build/, run the test suite and `make distcheck`, then build again
# with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and run the suite there.
# distcheck proves the tarball: it ships every tracked file (checked below against git),
# builds every program and test program, installs, and passes the quick tests (TESTS less
# the Makefile's SLOW_TESTS); the plain and ASan trees run every test, so no test is lost.
# The CUDA objects (host-compiled by nvcc, never sanitized) build for every architecture
# in build/; distcheck and build-asan/ build them for one (compute_80 PTX) to save time.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
mpplan_install_deps
autoreconf -fi
jobs=$(nproc)
# automake's config.h rule runs its (no-op) recipe in every make while stamp-h1 is newer,
# and `make -j2 check` then starts the test programs only after every script: config.h
# as old as stamp-h1 lets TESTS run in the Makefile's order (the longest first).
tree_configured () { touch -r stamp-h1 config.h; }

echo "== build (warnings are errors) and test"
mkdir -p build
(cd build && ../configure --enable-werror >/dev/null && tree_configured && make -j"$jobs" &&
  make -j"$jobs" check || { cat test-suite.log 2>/dev/null; exit 1; })

one_arch="NVCC_GENCODE=-gencode=arch=compute_80,code=compute_80"
echo "== make distcheck (the quick tests)"
(cd build && make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror "$one_arch" \
  TESTS="$(make -s print-quick-tests)" >distcheck.log 2>&1 || { tail -50 distcheck.log; exit 1; })
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tar tzf build/mpplan-*.tar.gz | sed 's|^[^/]*/||' | sort >build/dist.list
  git ls-files | grep -vx '.gitignore' | sort | comm -23 - build/dist.list >build/undist.list
  [ ! -s build/undist.list ] ||
    { echo "tracked but not in the tarball (EXTRA_DIST):"; cat build/undist.list; exit 1; }
fi

echo "== ASan + UBSan build and test"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p build-asan
(cd build-asan && ../configure --enable-werror CFLAGS="-O1 -g $san" LDFLAGS="$san" >/dev/null &&
  tree_configured &&
  make -j"$jobs" "$one_arch" &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    make -j"$jobs" "$one_arch" check || { cat test-suite.log 2>/dev/null; exit 1; })
echo "== all tests passed (plain and ASan+UBSan builds)"
