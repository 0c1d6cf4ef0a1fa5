// DSML tool-call rendering (see dsml_render.h). Names, keys and values are client data: they go
// in as text, so a value that spells "</｜DSML｜parameter>" stays ordinary bytes in the id form.
#include "tokenizer/chat/dsml_render.h"

#include <optional>

#include "tokenizer/chat/py_json.h"
#include "tokenizer/chat/templates.h"

namespace deepinfer::chat {
namespace {

// The arguments as a JSON object, as the reference decodes them: V4 tries json.loads once;
// V4.1 also unwraps a double-encoded string. nullopt = fall back to {"arguments": raw}.
std::optional<pyjson::Value> decode_arguments(const std::string& raw, ModelFamily family) {
  auto parsed = pyjson::parse(raw);
  if (!parsed.is_ok()) return std::nullopt;
  pyjson::Value value = std::move(parsed).value();
  if (family == ModelFamily::kV41 && value.is_string()) {
    auto inner = pyjson::parse(value.text);
    if (!inner.is_ok()) return std::nullopt;
    value = std::move(inner).value();
  }
  if (!value.is_object()) return std::nullopt;
  return value;
}

void add_parameter(const DsmlTags& tags, std::string_view key, const pyjson::Value& value,
                   PromptBuilder* out) {
  out->add_text("<");
  out->add_special(special::kDsml);
  out->add_text(tags.parameter);
  out->add_text(" name=\"");
  out->add_text(key);
  if (value.is_string()) {
    out->add_text("\" string=\"true\">");
    out->add_text(value.text);
  } else {
    out->add_text("\" string=\"false\">");
    out->add_text(pyjson::dump(value));
  }
  out->add_text("</");
  out->add_special(special::kDsml);
  out->add_text(tags.parameter);
  out->add_text(">");
}

void add_invoke(const DsmlTags& tags, const ToolCall& call, ModelFamily family,
                PromptBuilder* out) {
  out->add_text("<");
  out->add_special(special::kDsml);
  out->add_text(tags.invoke);
  out->add_text(" name=\"");
  out->add_text(call.name);
  out->add_text("\">\n");
  std::optional<pyjson::Value> args = decode_arguments(call.arguments, family);
  if (args) {
    for (size_t k = 0; k < args->members.size(); ++k) {
      if (k > 0) out->add_text("\n");
      add_parameter(tags, args->members[k].first, args->members[k].second, out);
    }
  } else {
    pyjson::Value raw;
    raw.type = pyjson::Value::Type::kString;
    raw.text = call.arguments;
    add_parameter(tags, "arguments", raw, out);
  }
  out->add_text("\n</");
  out->add_special(special::kDsml);
  out->add_text(tags.invoke);
  out->add_text(">");
}

}  // namespace

void add_dsml_tool_calls(std::span<const ToolCall> calls, ModelFamily family, PromptBuilder* out) {
  const DsmlTags& tags = dsml_tags(family);
  out->add_text("\n\n<");
  out->add_special(special::kDsml);
  out->add_text(tags.calls);
  out->add_text(">\n");
  for (size_t k = 0; k < calls.size(); ++k) {
    if (k > 0) out->add_text("\n");
    add_invoke(tags, calls[k], family, out);
  }
  out->add_text("\n</");
  out->add_special(special::kDsml);
  out->add_text(tags.calls);
  out->add_text(">");
}

}  // namespace deepinfer::chat
