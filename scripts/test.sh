#!/bin/sh
# test.sh - the README's second command, and all that CI runs: install what is missing,
# build with -Werror in build/, run the test suite and `make distcheck`, then build again
# with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and run the suite there.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
mpplan_install_deps
autoreconf -fi
jobs=$(nproc)

echo "== build (warnings are errors) and test"
mkdir -p build
(cd build && ../configure --enable-werror >/dev/null && make -j"$jobs" &&
  make -j"$jobs" check || { cat test-suite.log 2>/dev/null; exit 1; })

echo "== make distcheck"
(cd build && make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror >distcheck.log 2>&1 ||
  { tail -50 distcheck.log; exit 1; })

echo "== ASan + UBSan build and test"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p build-asan
(cd build-asan && ../configure --enable-werror CFLAGS="-O1 -g $san" LDFLAGS="$san" >/dev/null &&
  make -j"$jobs" &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    make -j"$jobs" check || { cat test-suite.log 2>/dev/null; exit 1; })
echo "== all tests passed (plain and ASan+UBSan builds)"
