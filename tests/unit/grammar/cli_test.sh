#!/usr/bin/env bash
# `deepinfer grammar check|bench` end to end: exit 0 accepted, 1 rejected (with token index and
# byte offset), 2 grammar errors naming the keyword/construct, for each grammar source.
# Usage: cli_test.sh <deepinfer> <tokenizer.json>
set -uo pipefail
cli=$1
tokenizer=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n_pass=0
n_fail=0

# expect NAME EXIT_CODE OUTPUT_SUBSTRING INPUT ARGS...
expect() {
  local name=$1 code=$2 message=$3 input=$4
  shift 4
  local out rc
  out=$(printf '%s' "$input" | "$cli" grammar "$@" --tokenizer "$tokenizer" 2>&1)
  rc=$?
  if [ "$rc" != "$code" ] || [[ "$out" != *"$message"* ]]; then
    n_fail=$((n_fail + 1))
    printf 'FAIL %s: exit %s (want %s), output %q lacks %q\n' "$name" "$rc" "$code" "$out" "$message"
  else
    n_pass=$((n_pass + 1))
  fi
}

cat > "$work/person.json" <<'JSON'
{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":150}},
 "required":["name","age"],"additionalProperties":false}
JSON
echo '{"type":"object","properties":{"a":{"not":{"type":"string"}}}}' > "$work/not.json"
printf 'root ::= "(" [0-9]+ ("," [0-9]+)* ")"\n' > "$work/list.gbnf"
printf 'root ::= "(" [0-9]+ )\n' > "$work/bad.gbnf"   # unbalanced parenthesis
cat > "$work/tools.json" <<'JSON'
[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string"}},"required":["city"]}}}]
JSON
D=$'\xef\xbd\x9c''DSML'$'\xef\xbd\x9c'
call="reason</think>ok"$'\n\n'"<${D}tool_calls>"$'\n'"<${D}invoke name=\"get_weather\">"$'\n'"<${D}parameter name=\"city\" string=\"true\">Paris</${D}parameter>"$'\n'"</${D}invoke>"$'\n'"</${D}tool_calls>"

expect "schema accepted" 0 "accepted: " '{"name":"Ann 李","age":42}' check --json-schema "$work/person.json" --verify-masks
expect "schema value rejected" 1 "rejected: token" '{"name":"Ann","age":420}' check --json-schema "$work/person.json"
expect "schema rejection offset" 1 "at byte offset 20" '{"name":"Ann","age":420}' check --json-schema "$work/person.json"
expect "schema incomplete" 1 "incomplete" '{"name":"Ann"' check --json-schema "$work/person.json"
expect "schema order" 1 "rejected" '{"age":1,"name":"Ann"}' check --json-schema "$work/person.json"
expect "schema any order" 0 "accepted" '{"age":1,"name":"Ann"}' check --json-schema "$work/person.json" --any-order
expect "unsupported keyword" 2 "keyword 'not' at #/properties/a" '{}' check --json-schema "$work/not.json"
expect "regex accepted" 0 "accepted" 'abc@hello.com' check --regex '[a-z]+@[a-z]+\.com'
expect "regex rejected" 1 "rejected" 'abc@hello.org' check --regex '[a-z]+@[a-z]+\.com'
expect "regex construct" 2 "lookahead" 'x' check --regex '(?=x)x'
expect "ebnf accepted" 0 "accepted" '(1,22,333)' check --ebnf "$work/list.gbnf"
expect "ebnf rejected" 1 "rejected" '(1,,2)' check --ebnf "$work/list.gbnf"
expect "ebnf syntax" 2 "line 1" '(1)' check --ebnf "$work/bad.gbnf"
expect "dsml accepted" 0 "accepted" "$call" check --dsml "$work/tools.json" --thinking
expect "dsml wrong tool" 1 "rejected" "${call/get_weather/delete}" check --dsml "$work/tools.json" --thinking
expect "two sources" 2 "exactly one" 'x' check --regex 'x' --ebnf "$work/list.gbnf"
expect "bench" 0 "warm: mask p50" '{"name":"Ann","age":1}' bench --json-schema "$work/person.json" --repeat 2

echo "grammar cli: $n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
