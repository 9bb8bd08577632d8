#!/bin/sh
# bad-input.sh - every file in tests/bad/ must be refused by `mpplan validate` with exit
# code 2, a FILE:LINE:COLUMN: message containing the text the file expects (its first
# line "# expect: TEXT", or TEXT in FILE.expect beside a file that cannot hold a comment),
# and nothing on stdout. Also: a directory and a missing path.
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# refused FILE EXPECT: validate fails as promised.
refused () {
  "$MPPLAN" validate "$1" >"$out" 2>"$err"
  status=$?
  if [ $status -ne 2 ]; then echo "# $1: exit $status, expected 2" >&2; cat "$err" >&2; return 1; fi
  if [ -s "$out" ]; then echo "# $1: wrote to stdout" >&2; return 1; fi
  if ! grep -Eq "^$1:[0-9]+:[0-9]+: " "$err"; then
    echo "# $1: no located message:" >&2; cat "$err" >&2; return 1
  fi
  if ! grep -Fq -- "$2" "$err"; then
    echo "# $1: message lacks '$2':" >&2; cat "$err" >&2; return 1
  fi
}

for f in "$top_srcdir"/tests/bad/*; do
  case $f in *.expect) continue ;; esac
  if [ -f "$f.expect" ]; then
    expect=$(cat "$f.expect")
  else
    expect=$(sed -n '1s/^# expect: //p' "$f")
  fi
  if [ -z "$expect" ]; then
    ok "$(basename "$f") declares what it expects" false
    continue
  fi
  ok "$(basename "$f") refused: $expect" refused "$f" "$expect"
done

# status_is N COMMAND...: COMMAND exits with N.
status_is () { want=$1; shift; "$@" >/dev/null 2>&1; [ $? -eq "$want" ]; }
ok "a directory is refused with exit 2" status_is 2 "$MPPLAN" validate "$top_srcdir/tests/bad"
ok "a missing path is refused with exit 2" status_is 2 "$MPPLAN" validate /nonexistent/model.yaml
ok "describe of a bad file exits 2" status_is 2 "$MPPLAN" describe "$top_srcdir/tests/bad/empty.yaml"
tap_done
