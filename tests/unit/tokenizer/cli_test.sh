#!/usr/bin/env bash
# `deepinfer tokenize` / `detokenize` end to end: ids, round trips, --special, --jsonl, and the
# exit codes and messages for bad input. Usage: cli_test.sh <deepinfer> <tokenizer.json>
set -uo pipefail
cli=$1
tokenizer=$2
n_pass=0
n_fail=0

check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then
    n_pass=$((n_pass + 1))
  else
    n_fail=$((n_fail + 1))
    printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"
  fi
}

# expect_error NAME EXIT_CODE MESSAGE_SUBSTRING INPUT ARGS...
expect_error() {
  local name=$1 code=$2 message=$3 input=$4
  shift 4
  local err rc
  err=$(printf '%s' "$input" | "$cli" "$@" 2>&1 >/dev/null)
  rc=$?
  check "$name exit code" "$code" "$rc"
  if [[ "$err" != *"$message"* ]]; then
    n_fail=$((n_fail + 1))
    printf 'FAIL %s: message %q lacks %q\n' "$name" "$err" "$message"
  else
    n_pass=$((n_pass + 1))
  fi
}

T=(--tokenizer "$tokenizer")
vector='<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>'
check "tokenize --special" "128803 30594 128804 128821 36101 128822 7624 1" \
  "$(printf '%s' "$vector" | "$cli" tokenize "${T[@]}" --special)"
check "tokenize without --special" "30 28217 6756 28217 32 6366" \
  "$(printf '%s' '<｜User｜>hi' | "$cli" tokenize "${T[@]}")"
check "detokenize" "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>" \
  "$(echo "128803 30594 128804 128821 36101 128822 7624 1" | "$cli" detokenize "${T[@]}")"
check "detokenize --skip-special" "你好推理答案" \
  "$(printf '128803 30594\n128804 128821 36101 128822 7624 1\n' | "$cli" detokenize "${T[@]}" --skip-special)"
text=$'line one\n\ttabbed  😀\r\nend'
check "round trip" "$text" "$(printf '%s' "$text" | "$cli" tokenize "${T[@]}" | "$cli" detokenize "${T[@]}")"
check "no trailing newline added" "1" "$(echo "3" | "$cli" detokenize "${T[@]}" | wc -c | tr -d ' ')"
# 357 is the token of bytes E4 BD, the first two bytes of 你: kept raw, completed by 1 more byte.
check "incomplete character kept raw" "e4bd" "$(echo "357" | "$cli" detokenize "${T[@]}" | od -An -tx1 | tr -d ' \n')"
check "empty input" "" "$(printf '' | "$cli" tokenize "${T[@]}")"
check "jsonl tokenize" $'[19923,3]\n[]\n[128803]' \
  "$(printf '"Hello!"\n""\n"<｜User｜>"\n' | "$cli" tokenize "${T[@]}" --jsonl --special)"
check "jsonl round trip" $'"Hello!"\n"a\\nb\\t😀"' \
  "$(printf '"Hello!"\n"a\\nb\\t😀"\n' | "$cli" tokenize "${T[@]}" --jsonl | "$cli" detokenize "${T[@]}" --jsonl)"
check "jsonl detokenize of a split character" '"�"' "$(echo '[357]' | "$cli" detokenize "${T[@]}" --jsonl)"

expect_error "non-numeric id" 1 '"abc" is not an integer id' "1 abc 2" detokenize "${T[@]}"
expect_error "id out of range" 1 "id 999999 is out of range" "999999" detokenize "${T[@]}"
expect_error "negative id" 1 "id -3 is out of range" "-3" detokenize "${T[@]}"
expect_error "huge id" 1 "not an integer id" "99999999999999999999999" detokenize "${T[@]}"
expect_error "unassigned id" 1 "id 128815 is not assigned" "128815" detokenize "${T[@]}"
expect_error "jsonl invalid JSON (tokenize)" 1 "stdin line 2: invalid JSON" $'"ok"\n{oops\n' tokenize "${T[@]}" --jsonl
expect_error "jsonl not a string" 1 "stdin line 1: expected a JSON string" $'[1,2]\n' tokenize "${T[@]}" --jsonl
expect_error "jsonl invalid JSON (detokenize)" 1 "stdin line 1: invalid JSON" $'[1,\n' detokenize "${T[@]}" --jsonl
expect_error "jsonl not an array" 1 "expected a JSON array" $'"x"\n' detokenize "${T[@]}" --jsonl
expect_error "jsonl bad element" 1 "stdin line 1, element 1: not an integer id" $'[1,"x"]\n' detokenize "${T[@]}" --jsonl
expect_error "jsonl element out of range" 1 "element 0: id 200000 is out of range" $'[200000]\n' detokenize "${T[@]}" --jsonl
expect_error "missing tokenizer" 2 "/nonexistent/tokenizer.json" "x" tokenize --tokenizer /nonexistent/tokenizer.json
bad_json=$(mktemp)
echo '{"model": ' > "$bad_json"
expect_error "malformed tokenizer" 2 "$bad_json" "1" detokenize --tokenizer "$bad_json"
rm -f "$bad_json"

echo "$n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
