#!/bin/sh
# output.sh - outputs are written safely (common/output.c), whatever -o, --trace or --html
# names: a regular file whole or not at all (a failed write leaves the old file and no
# temporary file), a symbolic link followed to its target (the link stays a link), a
# device or FIFO written in place and never replaced (/dev/full, a named pipe, a link to
# this process's stdout), `-o -` on stdout; every write error exits 1 naming the file.
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
data=$top_srcdir/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plan () { "$MPPLAN" plan -q -m "$data/model-exec.yaml" -c "$data/cluster-host2.yaml" --refine 0 "$@"; }

# fails_naming FILE COMMAND...: COMMAND exits 1 and its message names FILE.
fails_naming () {
  f=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  status=$?
  if [ $status -ne 1 ]; then echo "# exit $status, expected 1" >&2; cat "$tmp/err" >&2; return 1; fi
  grep -Fq "cannot write $f" "$tmp/err" || { echo "# message:" >&2; cat "$tmp/err" >&2; return 1; }
}
# only_files DIR NAME...: DIR holds exactly NAME... (no temporary file left behind).
only_files () {
  d=$1; shift
  [ "$(ls -A "$d" | sort | tr '\n' ' ')" = "$(printf '%s\n' "$@" | sort | tr '\n' ' ')" ] ||
    { echo "# $d holds: $(ls -A "$d")" >&2; return 1; }
}

# A regular file: written whole; its mode kept.
plan -o "$tmp/plan.yaml" >/dev/null 2>&1
ok "a regular file is written" "$MPPLAN" validate -q "$tmp/plan.yaml"
chmod 640 "$tmp/plan.yaml"
plan -o "$tmp/plan.yaml" >/dev/null 2>&1
ok "a replaced file keeps its mode" test "$(stat -c %a "$tmp/plan.yaml")" = 640

# A failing write (the file-size limit, with SIGXFSZ ignored, makes write fail with EFBIG
# part-way): exit 1, the old file untouched, no temporary file.
mkdir "$tmp/fsize"
echo old >"$tmp/fsize/plan.yaml"
ok "a write that fails part-way exits 1 naming the file" \
  fails_naming "$tmp/fsize/plan.yaml" sh -c "trap '' XFSZ; ulimit -f 1; exec \"\$0\" plan -q \
    -m \"\$1\" -c \"\$2\" --refine 0 -o \"\$3\"" "$MPPLAN" "$data/model-exec.yaml" \
    "$data/cluster-host2.yaml" "$tmp/fsize/plan.yaml"
ok "... leaves the old file as it was" test "$(cat "$tmp/fsize/plan.yaml")" = old
ok "... and no temporary file" only_files "$tmp/fsize" plan.yaml

# A symbolic link: its target is written, the link stays; a dangling one creates its target.
mkdir "$tmp/link"
echo old >"$tmp/link/target.yaml"
ln -s target.yaml "$tmp/link/plan.yaml"
plan -o "$tmp/link/plan.yaml" >/dev/null 2>&1
ok "through a symlink the target is written" "$MPPLAN" validate -q "$tmp/link/target.yaml"
ok "... and the link stays a link" test -L "$tmp/link/plan.yaml"
ok "... with no other file" only_files "$tmp/link" plan.yaml target.yaml
ln -s new.yaml "$tmp/link/dangling.yaml"
plan -o "$tmp/link/dangling.yaml" >/dev/null 2>&1
ok "a dangling symlink's target is created" "$MPPLAN" validate -q "$tmp/link/new.yaml"
ok "... and the link stays a link" test -L "$tmp/link/dangling.yaml"

# A device: written in place, never replaced; a full one is an error.
ok "-o /dev/full exits 1 naming it" fails_naming /dev/full plan -o /dev/full
ok "... and /dev/full is still a device" test -c /dev/full
ln -s /dev/full "$tmp/full"
ok "a symlink to /dev/full exits 1 naming the link" fails_naming "$tmp/full" plan -o "$tmp/full"
ok "... and stays a link" test -L "$tmp/full"
ok "simulate --trace /dev/full exits 1" \
  fails_naming /dev/full "$MPPLAN" simulate -p "$tmp/plan.yaml" --trace /dev/full
ok "report --html /dev/full exits 1" fails_naming /dev/full "$MPPLAN" report \
  -p "$data/predicted-pp2.json" -m "$data/measured-pp2.json" --html /dev/full
ok "--json onto a full stdout exits 1" fails_naming "standard output" \
  sh -c '"$0" simulate -p "$1" --json >/dev/full' "$MPPLAN" "$tmp/plan.yaml"
ok "printed text onto a full stdout exits 1" fails_naming "standard output" \
  sh -c '"$0" simulate -p "$1" >/dev/full' "$MPPLAN" "$tmp/plan.yaml"

# A FIFO: written through, still a FIFO afterwards.
mkfifo "$tmp/fifo"
cat "$tmp/fifo" >"$tmp/from-fifo" &
reader=$!
plan -o "$tmp/fifo" >/dev/null 2>&1
wait $reader
ok "a FIFO is written through" grep -q "^kind: plan" "$tmp/from-fifo"
ok "... and stays a FIFO" test -p "$tmp/fifo"

# This process's stdout, by /dev/stdout or a link to /proc/self/fd/1, and -o -.
plan -o /dev/stdout >"$tmp/stdout.yaml" 2>/dev/null
ok "-o /dev/stdout writes to stdout" grep -q "^kind: plan" "$tmp/stdout.yaml"
ln -s /proc/self/fd/1 "$tmp/self"
plan -o "$tmp/self" >"$tmp/self.yaml" 2>/dev/null
ok "a link to /proc/self/fd/1 writes to stdout" grep -q "^kind: plan" "$tmp/self.yaml"
ok "... and stays a link" test -L "$tmp/self"
plan -o - >"$tmp/dash.yaml" 2>"$tmp/dash.err"
ok "-o - writes the plan file alone to stdout" "$MPPLAN" validate -q "$tmp/dash.yaml"
ok "... and the table to stderr" grep -q "^rank " "$tmp/dash.err"
ok "-o - with --json is refused" sh -c '"$0" plan -q -o - --json >/dev/null 2>&1; [ $? -eq 2 ]' \
  "$MPPLAN"

# Folders: a folder or a missing one is an error naming the path.
ok "-o onto a folder exits 1" fails_naming "$tmp" plan -o "$tmp"
ok "-o into a missing folder exits 1" fails_naming "$tmp/none/plan.yaml" plan -o "$tmp/none/plan.yaml"
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  ok "-o into a read-only folder exits 1 (EACCES)" fails_naming "$tmp/ro/plan.yaml" \
    plan -o "$tmp/ro/plan.yaml"
  chmod 755 "$tmp/ro"
fi
tap_done
