#!/bin/sh
# quickstart.sh - the README's first command: install what is missing, build mpplan in
# build/, and run its main job on the bundled default: `mpplan plan` (GPT-3 175B on 128 DGX
# A100 nodes).
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
mpplan_install_deps
[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror
make -j"$(nproc)"
echo "== ./build/mpplan plan   (GPT-3 175B on 128 DGX A100 nodes)"
./mpplan plan
