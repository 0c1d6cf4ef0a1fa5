#!/bin/sh
# `deepinfer render-chat` end to end: the four official vectors byte for byte, --ids equal to
# the reference tokenization of that text (render-chat | tokenize --special), and exit code 2
# with a message naming the field for bad input.
# Usage: render_chat_cli_test.sh <deepinfer binary> <source dir>
set -u
bin=$1
fixtures=$2/tests/fixtures/encoding
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

check() {  # name, input file, expected file
  if ! "$bin" render-chat < "$2" > "$tmp/out"; then
    echo "FAIL $1: render-chat exited with $?"; status=1; return
  fi
  if ! cmp -s "$tmp/out" "$3"; then echo "FAIL $1: output differs from $3"; status=1; fi
}

# Case 1 is an object: add thinking_mode; cases 2-4 are message lists: wrap them.
sed '1s/{/{"thinking_mode": "thinking",/' "$fixtures/test_input_1.json" > "$tmp/in1.json"
for n in 2 3; do
  { printf '{"thinking_mode": "thinking", "messages": '; cat "$fixtures/test_input_$n.json"; printf '}'; } > "$tmp/in$n.json"
done
cp "$fixtures/test_input_4.json" "$tmp/in4.json"
for n in 1 2 3 4; do check "case$n" "$tmp/in$n.json" "$fixtures/test_output_$n.txt"; done

# --ids: only when the default tokenizer is available.
if "$bin" tokenize < /dev/null > /dev/null 2>&1; then
  for n in 1 3; do
    "$bin" render-chat --ids < "$tmp/in$n.json" > "$tmp/ids"
    "$bin" tokenize --special < "$fixtures/test_output_$n.txt" > "$tmp/ref"
    if ! cmp -s "$tmp/ids" "$tmp/ref"; then echo "FAIL ids$n: ids differ from tokenize --special"; status=1; fi
  done
else
  echo "note: no default tokenizer; --ids not checked"
fi

expect_error() {  # name, input text, message fragment
  printf '%s' "$2" | "$bin" render-chat > /dev/null 2> "$tmp/err"
  code=$?
  if [ "$code" -ne 2 ]; then echo "FAIL $1: exit code $code, expected 2"; status=1; fi
  if ! grep -qF "$3" "$tmp/err"; then echo "FAIL $1: stderr lacks '$3': $(cat "$tmp/err")"; status=1; fi
}
expect_error bad_json '{"messages": [' 'invalid JSON at byte'
expect_error bad_type '{"messages": [{"role": "user", "content": 7}]}' 'messages[0].content: expected a string, a list or null'
expect_error bad_mode '{"messages": [], "thinking_mode": 1}' 'thinking_mode: expected "chat" or "thinking"'
printf '[{"role": "developer", "content": "d"}]' | "$bin" render-chat --model-family v41 > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -qF 'messages[0].role: V4.1 has no developer role' "$tmp/err" || { echo "FAIL v41_developer"; status=1; }

[ $status -eq 0 ] && echo "render-chat CLI: all checks passed"
exit $status
