#!/bin/sh
# bad-input.sh - every file in tests/bad/ must be refused by the command that reads what
# its name says it is, with exit code 2, a message naming the file (FILE:LINE:COLUMN: for
# YAML, FILE: or FILE:LINE:COLUMN: for JSON) that contains the text the file expects (its
# first line "# expect: TEXT", or TEXT in FILE.expect beside a file that cannot hold a
# comment), no GLib or json-glib critical (G_DEBUG=fatal-criticals makes one a crash),
# and nothing on stdout. Also: a directory and a missing path.
#
# What reads each file, by its name:
#   measured-*        report -p tests/data/predicted-pp2.json -m FILE
#   predicted-*       report -p FILE -m tests/data/measured-pp2.json
#   trace-*           report ... --measured-trace FILE --html (a measured Chrome trace)
#   hf-*              import hf FILE (a Hugging Face config.json)
#   plan-*.json       simulate -p FILE (JSON where a plan YAML is expected)
#   profile-*.json, profile-device-*
#                     plan -m tiny-gpt -c host --profile FILE (a profile for another device)
#   anything else     validate FILE (model, cluster, plan or profile YAML)
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
data=$top_srcdir/tests/data
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
G_DEBUG=fatal-criticals
export G_DEBUG

# read_as FILE: runs the command that reads FILE as what its name says.
read_as () {
  case $(basename "$1") in
    measured-*) "$MPPLAN" report -p "$data/predicted-pp2.json" -m "$1" ;;
    predicted-*) "$MPPLAN" report -p "$1" -m "$data/measured-pp2.json" ;;
    trace-*) "$MPPLAN" report -p "$data/predicted-pp2.json" -m "$data/measured-pp2.json" \
      --predicted-trace "$data/trace-predicted-pp2.json" --measured-trace "$1" \
      --html /dev/null ;;
    hf-*) "$MPPLAN" import hf "$1" ;;
    plan-*.json) "$MPPLAN" simulate -p "$1" ;;
    profile-*.json | profile-device-*)
      "$MPPLAN" plan -q -m tiny-gpt -c host --profile "$1" ;;
    *) "$MPPLAN" validate "$1" ;;
  esac
}

# refused FILE EXPECT: its reader fails as promised.
refused () {
  read_as "$1" >"$out" 2>"$err"
  status=$?
  if [ $status -ne 2 ]; then echo "# $1: exit $status, expected 2" >&2; cat "$err" >&2; return 1; fi
  if [ -s "$out" ]; then echo "# $1: wrote to stdout" >&2; return 1; fi
  case $1 in
    *.json) located="^$1:([0-9]+:[0-9]+:)? " ;;
    *) located="^$1:[0-9]+:[0-9]+: " ;;
  esac
  case $(basename "$1") in
    measured-* | predicted-* | trace-* | hf-*) located="^$1:([0-9]+:[0-9]+:)? " ;;
  esac
  if ! grep -Eq "$located" "$err"; then
    echo "# $1: no located message:" >&2; cat "$err" >&2; return 1
  fi
  # common/log.c's "DOMAIN critical: ..." or GLib's "DOMAIN-CRITICAL **" (a key named
  # critical_rank in a message is no critical).
  if grep -Eq "^(\[rank [0-9]+\] )?[A-Za-z0-9_-]+ (critical|warning): |CRITICAL \*\*|WARNING \*\*" "$err"; then
    echo "# $1: a critical or warning:" >&2; cat "$err" >&2; return 1
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

# The good files the JSON cases are mutants of are read, so each refusal is the mutation's.
ok "the good prediction and measurement join" \
  "$MPPLAN" report -p "$data/predicted-pp2.json" -m "$data/measured-pp2.json"
ok "... with their traces" "$MPPLAN" report -p "$data/predicted-pp2.json" \
  -m "$data/measured-pp2.json" --predicted-trace "$data/trace-predicted-pp2.json" \
  --measured-trace "$data/trace-measured-pp2.json" --html /dev/null
ok "the good profile is valid" "$MPPLAN" validate -q "$data/profile-host.yaml"

# status_is N COMMAND...: COMMAND exits with N.
status_is () { want=$1; shift; "$@" >/dev/null 2>&1; [ $? -eq "$want" ]; }
ok "a directory is refused with exit 2" status_is 2 "$MPPLAN" validate "$top_srcdir/tests/bad"
ok "a missing path is refused with exit 2" status_is 2 "$MPPLAN" validate /nonexistent/model.yaml
ok "describe of a bad file exits 2" status_is 2 "$MPPLAN" describe "$top_srcdir/tests/bad/empty.yaml"
ok "a directory as a measured file exits 2" \
  status_is 2 "$MPPLAN" report -p "$data/predicted-pp2.json" -m "$top_srcdir/tests/bad"
ok "a missing measured file exits 2" \
  status_is 2 "$MPPLAN" report -p "$data/predicted-pp2.json" -m /nonexistent/measured.json

# Sizes from users are bounded before anything is allocated for them: refused with a
# message that names the bound, or answered (a --top above the plans found lists them all).
# refuses_with TEXT COMMAND...: COMMAND exits 2 and says TEXT.
refuses_with () {
  want=$1; shift
  "$@" >/dev/null 2>"$err"
  status=$?
  [ $status -eq 2 ] || { echo "# exit $status, expected 2" >&2; cat "$err" >&2; return 1; }
  grep -Fq -- "$want" "$err" || { echo "# message lacks '$want':" >&2; cat "$err" >&2; return 1; }
}
ok "plan -b 2147483647 is refused naming the bound" \
  refuses_with "--batch must be from 1 to 1000000000" "$MPPLAN" plan -q -m tiny-gpt -c host -b 2147483647
ok "plan --top 2147483647 answers with the plans there are" \
  "$MPPLAN" plan -q -m tiny-gpt -c host --refine 0 --top 2147483647
ok "a node count of 2147483647 is refused naming the bound" \
  refuses_with "node count from 1 to 1000000" "$MPPLAN" plan -q -m tiny-gpt -c dgx-h100:2147483647
ok "exec --steps 2147483647 is refused naming the bound" \
  refuses_with "--steps must be from 1 to 100000" "$MPPLAN" exec -p "$data/plan-small.yaml" \
  --steps 2147483647
ok "verify --steps 2147483647 is refused naming the bound" \
  refuses_with "--steps from 1 to 100000" "$MPPLAN" verify -m tiny-gpt -c host --steps 2147483647
ok "verify --rounds 101 is refused naming the bound" \
  refuses_with "--rounds must be 1 to 100" "$MPPLAN" verify -m tiny-gpt -c host --rounds 101
tap_done
