#!/bin/sh
# test-man.sh -- the manual pages (man/) format without a warning and say
# what the tools and the header have.
#
#  - each page formats with no warning: man-db's `man --warnings -l` (as
#    lintian runs it), else `groff -ww -z -man`, else `mandoc -T lint`;
#    with none of them installed those checks are skipped;
#  - every long option that `hippo-replay --help` and `hippo-info --help`
#    print is in the tool's page (so an option added without its
#    documentation fails here);
#  - every JSON key and summary line hippo-replay prints is named in
#    hippo-replay(1);
#  - every slot of hippo_api in include/hippo.h is named in hippo(3).
#
# Environment (from make check): top_srcdir, HIPPO_REPLAY, HIPPO_INFO.

set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
HIPPO_REPLAY=${HIPPO_REPLAY:-$top_srcdir/tools/hippo-replay}
HIPPO_INFO=${HIPPO_INFO:-$top_srcdir/tools/hippo-info}
man=$top_srcdir/man

. "$top_srcdir/tests/lib.sh"
lib_init test-man "$HIPPO_REPLAY"

skipped=0
skip() {
  skipped=$((skipped + 1))
  echo "SKIP: $1"
}

# ---- the pages format without a warning ------------------------------------
checker=
if man --help 2>/dev/null | grep -q -- '--warnings'; then
  checker=man
elif command -v groff >/dev/null 2>&1; then
  checker=groff
elif command -v mandoc >/dev/null 2>&1; then
  checker=mandoc
fi
for page in hippo-replay.1 hippo-info.1 hippo.3 hippo-alloc.3; do
  f=$man/$page
  if [ ! -f "$f" ]; then
    fail "$page: missing"
    continue
  fi
  case $checker in
    man)
      LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
        man --warnings -E UTF-8 -l -Tutf8 -Z "$f" >"$out" 2>"$err" ;;
    groff) groff -ww -z -man "$f" >"$out" 2>"$err" ;;
    mandoc) mandoc -T lint -W warning "$f" >"$err" 2>&1 ;;
    *)
      skip "$page: no man --warnings, groff or mandoc to check it with"
      continue ;;
  esac
  status=$?
  if [ "$status" -eq 0 ] && [ ! -s "$err" ]; then
    pass "$page: formats with no warning ($checker)"
  else fail "$page: $checker warns (exit $status)"; fi
done

# ---- every option of --help is in the page ----------------------------------
# options TOOL: the long options its --help prints, one per line.
options() {
  "$1" --help 2>/dev/null | grep -o -- '--[a-z][a-z-]*' | sort -u
}

for pair in "hippo-replay:$HIPPO_REPLAY" "hippo-info:$HIPPO_INFO"; do
  name=${pair%%:*}
  tool=${pair#*:}
  page=$man/$name.1
  opts=$(options "$tool")
  if [ -z "$opts" ]; then
    fail "$name --help prints no option"
    continue
  fi
  for opt in $opts; do
    # In roff a hyphen is written \- (or -): \-\-plugin, --plugin.
    word=${opt#--}
    if grep -q -e "\\\\-\\\\-$word\\([^a-z-]\\|\$\\)" \
      -e "--$word\\([^a-z-]\\|\$\\)" "$page"; then
      pass "$name.1 documents $opt"
    else fail "$name.1 does not document $opt (printed by $name --help)"; fi
  done
done

# ---- every JSON key and summary line of hippo-replay is in its page ---------
# The keys of `--json -` (nested ones too) and the "key:" of each summary
# line, on an RMM log replayed with --lenient (so the RMM and skipped
# lines print too).  A key is named in roff as `.B key`, `.BR key ,` or in
# running text.
rmm=$top_srcdir/tests/traces-rmm/rmm-fmt.csv
keys=$( ("$HIPPO_REPLAY" --quiet --lenient --json - "$rmm" 2>/dev/null
  "$HIPPO_REPLAY" --quiet --lenient --steps 2 --json - "$rmm" 2>/dev/null) |
  grep -o '"[a-z_]*":' | tr -d '":' | sort -u)
if [ -z "$keys" ]; then
  fail "hippo-replay --json - printed no key"
fi
for key in $keys; do
  if grep -qw -- "$key" "$man/hippo-replay.1"; then
    pass "hippo-replay.1 names the JSON key $key"
  else fail "hippo-replay.1 does not name the JSON key $key"; fi
done
# (--steps prints "step 1: ...", "step 1 calls: ...": named as "step N")
lines=$("$HIPPO_REPLAY" --lenient --steps 2 "$rmm" 2>/dev/null |
  sed 's/^step [0-9][0-9]*/step N/' |
  sed -n 's/^\([a-z][a-zN/ -]*\):.*/\1/p' | sort -u)
if [ -z "$lines" ]; then
  fail "hippo-replay printed no summary line"
fi
printf '%s\n' "$lines" | while IFS= read -r key; do
  # roff may break a multi-word key across lines: its first word, then
  # the whole key once the page is joined into one line
  if tr '\n' ' ' <"$man/hippo-replay.1" | sed 's/\\-/-/g; s/"//g' |
    grep -q -- "$key"; then
    echo "PASS: hippo-replay.1 names the summary line '$key'"
  else
    echo "FAIL: hippo-replay.1 does not name the summary line '$key'"
    exit 1
  fi
done || fail "a summary line of hippo-replay is not in its page"

# ---- every slot of the table is in hippo(3) --------------------------------
# names_in PAGE WHAT SOURCE NAMES: each of NAMES (the WHATs of SOURCE) is
# a word of man/PAGE.
names_in() {
  page=$1 what=$2 source=$3
  shift 3
  if [ $# -eq 0 ]; then
    fail "no $what found in $source"
  fi
  for name in "$@"; do
    if grep -qw -- "$name" "$man/$page"; then pass "$page names $name"
    else fail "$page does not name the $what $name"; fi
  done
}

# shellcheck disable=SC2046 # one name a word
names_in hippo.3 slot include/hippo.h \
  $(sed -n '/^typedef struct hippo_api {/,/^} hippo_api;/p' \
    "$top_srcdir/include/hippo.h" | grep -o '(\*[a-z_]*)' | tr -d '(*)')

# ---- every function of hippo-alloc.h is in hippo-alloc(3) ------------------
# shellcheck disable=SC2046
names_in hippo-alloc.3 function include/hippo-alloc.h \
  $(grep -o '[ *]hippo_[a-z_]*(' "$top_srcdir/include/hippo-alloc.h" |
    tr -d ' *(' | sort -u)

[ "$skipped" -eq 0 ] || echo "($skipped checks skipped)"
lib_finish
