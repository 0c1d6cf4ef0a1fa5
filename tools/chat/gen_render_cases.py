#!/usr/bin/env python3
"""Generates tests/fixtures/chat_render/v4_cases.json: conversations rendered by DeepSeek's
official V4 encoder (encoding/encoding_dsv4.py of the DeepSeek-V4-Flash HF release, MIT).

The encoder is not part of this repository: pass the folder that holds encoding_dsv4.py.
    python3 tools/chat/gen_render_cases.py --encoder-dir /path/to/DeepSeek-V4-Flash/encoding
Each case stores its input as JSON text (read by deepinfer::chat::parse_chat_json exactly as
Python's json.loads reads it) and the encoder's output string.
"""
import argparse
import json
import os
import sys

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "城市"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "scale": {"type": "number", "default": 0.5, "exclusiveMaximum": 1e20},
            "big": {"type": "integer", "default": 123456789012345678901234567890}},
            "required": ["city"]}}},
    {"type": "function", "function": {"name": "noop", "description": "", "parameters": {}}},
]

ARGS_MIXED = json.dumps({"city": "Paris \"central\"\n", "days": 3, "scale": 0.25,
                         "tags": ["a", "b"], "opts": {"x": None, "y": True}, "pi": 3.0,
                         "uni": "東京 ☀"}, ensure_ascii=False, separators=(",", ":"))


def conv(messages, mode="thinking", **options):
    case = {"messages": messages, "thinking_mode": mode}
    case.update(options)
    return case


def cases():
    sys_msg = {"role": "system", "content": "You are a helpful assistant."}
    yield "effort_max_thinking", conv([sys_msg, {"role": "user", "content": "Hi"}],
                                      reasoning_effort="max")
    yield "effort_high_thinking", conv([sys_msg, {"role": "user", "content": "Hi"}],
                                       reasoning_effort="high")
    yield "effort_max_chat", conv([sys_msg, {"role": "user", "content": "Hi"}], "chat",
                                  reasoning_effort="max")
    yield "effort_max_first_user", conv([{"role": "user", "content": "Hi"}],
                                        reasoning_effort="max")
    multi = [sys_msg, {"role": "user", "content": "one"},
             {"role": "assistant", "reasoning_content": "r1", "content": "a1"},
             {"role": "user", "content": "two"},
             {"role": "assistant", "reasoning_content": "r2", "content": "a2"},
             {"role": "user", "content": "three"}]
    yield "keep_thinking_multi_turn", conv(multi, drop_thinking=False)
    yield "drop_thinking_multi_turn", conv(multi)
    yield "chat_multi_turn", conv(multi, "chat")
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS_MIXED}},
        {"id": "c2", "type": "function", "function": {"name": "noop", "arguments": "{}"}},
        {"id": "c3", "type": "function", "function": {"name": "get_weather",
                                                      "arguments": "not json {"}},
        {"id": "c4", "type": "function", "function": {"name": "noop", "arguments": ""}},
    ]
    tools_conv = [dict(sys_msg, tools=TOOLS), {"role": "user", "content": "weather?"},
                  {"role": "assistant", "reasoning_content": "need tools", "content": "Checking.",
                   "tool_calls": calls},
                  {"role": "tool", "tool_call_id": "c3", "content": "third"},
                  {"role": "tool", "tool_call_id": "c1",
                   "content": [{"type": "text", "text": "first a"}, {"type": "image"},
                               {"type": "text", "text": "first b"}]},
                  {"role": "tool", "tool_call_id": "c4", "content": "fourth"},
                  {"role": "tool", "tool_call_id": "c2", "content": "second"},
                  {"role": "user", "content": "and tomorrow?"}]
    yield "tools_sorted_results_thinking", conv(tools_conv)
    yield "tools_sorted_results_chat", conv(tools_conv, "chat")
    yield "system_tools_no_content", conv([{"role": "system", "tools": TOOLS[1:]},
                                           {"role": "user", "content": "x"}])
    fmt_schema = {"type": "json_schema", "json_schema": {"name": "r", "schema": {
        "type": "object", "properties": {"n": {"type": "number", "minimum": -1.5}}}}}
    yield "response_format", conv([dict(sys_msg, response_format=fmt_schema),
                                   {"role": "user", "content": "json please"}], "chat")
    yield "response_format_empty", conv([dict(sys_msg, response_format={}),
                                         {"role": "user", "content": "x"}], "chat")
    yield "developer_dropped_before_last_user", conv([
        sys_msg, {"role": "developer", "content": "dev instructions"},
        {"role": "assistant", "reasoning_content": "r", "content": "a"},
        {"role": "user", "content": "next"}])
    yield "developer_last_with_tools", conv([sys_msg, {"role": "developer", "content": "find it",
                                                       "tools": TOOLS}])
    yield "tasks", conv([
        sys_msg, {"role": "user", "content": "q", "task": "query"},
        {"role": "assistant", "content": "search terms"},
        {"role": "user", "content": "t"},
        {"role": "assistant", "content": "answer", "task": "title"},
        {"role": "assistant", "content": "My Title"}], "chat")
    yield "action_task_thinking", conv([sys_msg, {"role": "user", "content": "q", "task": "action"}])
    yield "authority_task_last", conv([{"role": "user", "content": "q", "task": "authority"}])
    yield "reminder_after_user", conv([sys_msg, {"role": "user", "content": "u"},
                                       {"role": "latest_reminder", "content": "2026-01-01"},
                                       {"role": "assistant", "reasoning_content": "r",
                                        "content": "a"}])
    yield "wo_eos_prefill", conv([{"role": "user", "content": "u"},
                                  {"role": "assistant", "reasoning_content": "partial",
                                   "content": "Sure", "wo_eos": True}])
    yield "consecutive_users_merged", conv([{"role": "user", "content": "a"},
                                            {"role": "user", "content": "b"},
                                            {"role": "user", "content": "c", "task": "query"},
                                            {"role": "user", "content": "d"}], "chat")
    yield "tool_without_user", conv([sys_msg, {"role": "assistant", "content": "",
                                               "tool_calls": calls[1:2]},
                                     {"role": "tool", "content": "out <tool_result> end"},
                                     {"role": "assistant", "content": "done"}])
    yield "ends_with_assistant", conv([{"role": "user", "content": "u"},
                                       {"role": "assistant", "content": "a"}], "chat")
    yield "tools_on_user_ignored", conv([{"role": "user", "content": "u", "tools": TOOLS},
                                         {"role": "assistant", "reasoning_content": "r",
                                          "content": "a"},
                                         {"role": "user", "content": "v"}])
    yield "unicode_and_markup_text", conv([
        {"role": "system", "content": "系统 <b>bold</b> \\n {braces} 😀"},
        {"role": "user", "content": "emoji 😀 tab\t nul-free \u2028 end"}], "chat")
    yield "empty_messages", conv([], "thinking")
    yield "no_bos", conv([{"role": "user", "content": "u"}], "chat")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder-dir", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests",
                                                  "fixtures", "chat_render", "v4_cases.json"))
    args = ap.parse_args()
    sys.path.insert(0, args.encoder_dir)
    from encoding_dsv4 import encode_messages  # noqa: E402  (the official encoder)

    out = []
    for name, case in cases():
        text = json.dumps(case, ensure_ascii=False)
        parsed = json.loads(text)
        bos = name != "no_bos"
        if not bos:
            parsed["add_bos"] = False
            text = json.dumps(parsed, ensure_ascii=False)
        expected = encode_messages(parsed["messages"], thinking_mode=parsed["thinking_mode"],
                                   drop_thinking=parsed.get("drop_thinking", True),
                                   add_default_bos_token=bos,
                                   reasoning_effort=parsed.get("reasoning_effort"))
        out.append({"name": name, "input": text, "expected": expected})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out)} cases to {args.out}")


if __name__ == "__main__":
    main()
