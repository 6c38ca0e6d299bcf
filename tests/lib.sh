# lib.sh -- helpers shared by the shell tests of the tools (test-info.sh,
# test-replay.sh).  A test sets top_srcdir and sources this file:
#   . "$top_srcdir/tests/lib.sh"
#
#  lib_init NAME TOOL   TOOL must be an executable (exit 99 otherwise);
#                       makes $tmp (removed on exit), $out and $err
#  lib_replay_init NAME lib_init for hippo-replay, and the plugin must
#                       replay a 2-event trace (exit 99 otherwise)
#  replay ARGS...       runs hippo-replay into $status, $out, $err
#  info ARGS...         runs hippo-info ($HIPPO_INFO) likewise
#  pass TEXT, fail TEXT count a check (fail shows $out and $err)
#  expect_status NAME STATUS   $status is STATUS
#  expect_line NAME LINE       $out has LINE, exactly ($line_where ends
#                              the failure message)
#  expect_err NAME TEXT        $err has TEXT (a fixed string) somewhere
#  expect_first_err NAME LINE  $err's first line is LINE, exactly
#  expect_out NAME TEXT        $out has TEXT (a fixed string) somewhere
#  expect_pools NAME           what the test's pools() reads from $out is
#                              stdin (rows "index kind page max cap period")
#  lib_finish           prints the counts; true when nothing failed
#
# A test's run wrapper stores the tool's stdout in $out, its stderr in $err
# and its exit status in $status.

passed=0
failed=0
line_where=

lib_init() {
  if [ ! -x "$2" ]; then
    echo "$1: $2 is not built; run 'make' first" >&2
    exit 99
  fi
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
  trap 'rm -rf "$tmp"' EXIT
  out=$tmp/out
  err=$tmp/err
}

pass() {
  passed=$((passed + 1))
  echo "PASS: $1"
}

fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
  if [ -s "$out" ]; then sed 's/^/  stdout: /' "$out" | head -40; fi
  if [ -s "$err" ]; then sed 's/^/  stderr: /' "$err" | head -20; fi
}

# expect_status NAME STATUS
expect_status() {
  if [ "$status" -eq "$2" ]; then pass "$1: exit $2"
  else fail "$1: exit $status, expected $2"; fi
}

# expect_line NAME 'key: value' -- an exact line of the output.
expect_line() {
  if grep -qxF -- "$2" "$out"; then pass "$1: $2"
  else fail "$1: no line '$2'$line_where"; fi
}

# expect_err NAME TEXT: stderr has TEXT (a fixed string) somewhere.
expect_err() {
  if grep -qF -- "$2" "$err"; then pass "$1: stderr names $2"
  else fail "$1: stderr does not name $2"; fi
}

# expect_first_err NAME LINE: stderr's first line is exactly LINE (a usage
# error's message, before the usage).
expect_first_err() {
  if head -n 1 "$err" | grep -qxF -- "$2"; then pass "$1: says '$2'"
  else fail "$1: '$(head -n 1 "$err")'"; fi
}

# expect_out NAME TEXT: stdout has TEXT (a fixed string) somewhere.
expect_out() {
  if grep -qF -- "$2" "$out"; then pass "$1: stdout has $2"
  else fail "$1: stdout lacks $2"; fi
}

# expect_pools NAME: stdin holds the expected rows of hippo-info's pool
# table, as the test's own pools() function reads them from $out (test-info
# reads on to the table's notes, test-layout-cli stops at its end).
expect_pools() {
  cat >"$tmp/want"
  pools >"$tmp/got"
  if cmp -s "$tmp/want" "$tmp/got"; then pass "$1: the pool table"
  else
    fail "$1: the pool table differs"
    diff "$tmp/want" "$tmp/got" | sed 's/^/  /'
  fi
}

# info ARGS...: runs hippo-info ($HIPPO_INFO); $status, $out and $err hold
# the result.
info() {
  "$HIPPO_INFO" "$@" >"$out" 2>"$err"
  status=$?
}

# replay ARGS...: runs hippo-replay ($HIPPO_REPLAY); $status, $out and
# $err hold the result.  A test may define its own after sourcing this.
replay() {
  "$HIPPO_REPLAY" "$@" >"$out" 2>"$err"
  status=$?
}

# lib_replay_init NAME: lib_init for hippo-replay; then the plugin
# ($HIPPO_PLUGIN) must exist and replay a 2-event trace -- a plugin that
# does not load would fail every check, so say why once and stop (99: a
# hard error for the automake harness).
lib_replay_init() {
  lib_init "$1" "$HIPPO_REPLAY"
  line_where=" in the summary"
  if [ ! -f "$HIPPO_PLUGIN" ]; then
    echo "$1: no plugin at $HIPPO_PLUGIN; run 'make' first" >&2
    exit 99
  fi
  printf 'op,id,size,stream\na,1,4096,0\nf,1,,\n' >"$tmp/preflight.csv"
  if ! "$HIPPO_REPLAY" --backend dry "$tmp/preflight.csv" >"$out" 2>"$err"
  then
    echo "$1: hippo-replay cannot replay a 2-event trace with" \
      "$HIPPO_PLUGIN; fix that first:" >&2
    cat "$err" >&2
    exit 99
  fi
}

lib_finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
