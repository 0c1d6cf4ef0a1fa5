// JSON schema -> Grammar. Supported: type, enum, const, properties, required,
// additionalProperties, patternProperties, minProperties/maxProperties, items, prefixItems,
// draft-7 array items/additionalItems, minItems/maxItems, minLength/maxLength, pattern, format
// (date-time date time email hostname uuid uri ipv4 ipv6), minimum/maximum/exclusiveMinimum/
// exclusiveMaximum, multipleOf, anyOf, allOf (merged), oneOf (when its branches are provably
// disjoint), local $ref / $defs / definitions (recursion allowed), boolean schemas.
// Any other keyword that constrains instances is a compile error naming it and its JSON path;
// annotations (title, description, default, examples, ...) are ignored.
// Departures from the spec (documented in docs/structured-outputs.md): properties come in
// schema order unless any_order; constrained strings use the canonical escaping (json_string.h);
// numbers with bounds or multipleOf are written without exponent.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/json_string.h"

namespace deepinfer::grammar {

using Json = nlohmann::ordered_json;

enum class SchemaDraft : uint8_t {
  kAuto,    // from "$schema"; default 2020-12
  kDraft4,  // exclusiveMinimum/Maximum are booleans; 1.0 is not an integer; $ref siblings ignored
  kDraft7,  // draft 6/7: $ref siblings ignored
  k2020,    // 2019-09 / 2020-12: $ref siblings apply
};

struct JsonSchemaOptions {
  bool flexible_whitespace = false;  // allow [ \t\n\r]{0,max_whitespace} between tokens
  int32_t max_whitespace = 20;
  std::string item_separator = ",";  // used as-is when whitespace is compact
  std::string key_separator = ":";
  bool any_order = false;            // properties in any order (else schema order)
  int32_t max_any_order_properties = 10;
  bool one_of_as_any_of = false;     // accept oneOf whose branches cannot be proven disjoint
  bool unknown_formats_are_annotations = true;  // false (strict): an unknown format is a compile error
  SchemaDraft draft = SchemaDraft::kAuto;
  int64_t max_items_bound = 2'000;   // largest enforceable minItems/maxItems
  StringLimits strings;
  AutomatonLimits automata;
};

// Python json.dumps() spacing (", " and ": "), as DeepSeek's chat template writes JSON.
inline JsonSchemaOptions python_json_style() {
  JsonSchemaOptions o;
  o.item_separator = ", ";
  o.key_separator = ": ";
  return o;
}

// Compiles values of one schema document into rules of a Grammar (several compilers may share a
// Grammar, e.g. one per tool parameter in the DSML grammar).
class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(Grammar& grammar, const Json& document, const JsonSchemaOptions& options);
  ~JsonSchemaCompiler();
  // An AST node matching the JSON text of instances of `schema` (a part of the document).
  Result<NodeId> value(const Json& schema, const std::string& path);
  // The raw text (no quotes, no escapes) of the string instances of `schema`; kNothing if the
  // schema allows no string. Used for DSML string="true" parameters.
  Result<NodeId> raw_string_value(const Json& schema, const std::string& path);
  // Whitespace between tokens (empty node in compact mode).
  NodeId ws();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whole document as a grammar whose root matches one instance.
Result<Grammar> json_schema_to_grammar(const Json& schema, const JsonSchemaOptions& options);
Result<Grammar> json_schema_to_grammar(std::string_view schema_text, const JsonSchemaOptions& options);

}  // namespace deepinfer::grammar
