// Internals of JsonSchemaCompiler, shared by json_schema*.cc. Schemas are first normalized into
// one JSON object per (sub)schema with internal "$di:" keywords: allOf merged, const folded into
// enum, pattern/format/multipleOf as lists, anyOf/oneOf as groups, array items as prefix + rest,
// object key rules as "branches" (each allOf branch keeps its own properties / patternProperties /
// additionalProperties, so merged objects stay exact). Equal normalized schemas share one rule,
// which is also what makes recursive $refs terminate.
#pragma once

#include <map>
#include <string>

#include "grammar/json_schema.h"

namespace deepinfer::grammar {

inline constexpr const char* kPatterns = "$di:patterns";
inline constexpr const char* kFormats = "$di:formats";
inline constexpr const char* kMultipleOf = "$di:multipleOf";
inline constexpr const char* kGroups = "$di:groups";      // [{"anyOf": [...]} | {"oneOf": [...]}]
inline constexpr const char* kBranches = "$di:branches";  // [{"names": [...], "patterns": {...}, "additional": S}]
inline constexpr const char* kPrefix = "$di:prefix";      // positional item schemas
inline constexpr const char* kRest = "$di:rest";          // schema of items after the prefix

struct JsonSchemaCompiler::Impl {
  Impl(Grammar& grammar, const Json& document, const JsonSchemaOptions& options);

  // json_schema.cc
  Result<const Json*> resolve_ref(const std::string& ref, const std::string& path) const;
  Result<Json> normalize(const Json& schema, const std::string& path, int depth);
  Result<Json> merge(const Json& a, const Json& b, const std::string& path, int depth);
  Result<NodeId> value(const Json& schema, const std::string& path);

  // json_schema_values.cc
  Result<NodeId> typed(const Json& n, const std::string& path, int depth);
  Result<NodeId> groups(const Json& n, const std::string& path, int depth);
  Result<bool> disjoint(const Json& a, const Json& b, const std::string& path);
  Result<NodeId> enum_value(const Json& n, const std::string& path);
  // Enum members that also satisfy the sibling keywords of n.
  Result<std::vector<const Json*>> enum_members(const Json& n, const std::string& path);
  Result<NodeId> raw_string(const Json& n, const std::string& path, int depth);
  Result<NodeId> literal(const Json& v);
  Result<NodeId> number_value(const Json& n, const std::string& path, bool integer);
  Result<NodeId> string_value(const Json& n, const std::string& path);
  Result<NodeId> array_value(const Json& n, const std::string& path);
  NodeId any_value();
  NodeId free_string();

  // json_schema_object.cc
  Result<NodeId> object_value(const Json& n, const std::string& path);

  NodeId ws();
  NodeId item_sep();
  NodeId key_sep();

  Grammar& g;
  const Json& doc;
  JsonSchemaOptions o;
  SchemaDraft draft;
  std::map<std::string, NodeId> memo;  // normalized schema text -> its expression
  int32_t any_rule = -1;
  int32_t free_string_rule = -1;
  int32_t raw_text_rule = -1;
  int expansions = 0;  // anyOf/oneOf branches compiled so far (bounded)
};

// JSON-schema equality of instances (numbers by value, objects ignoring key order).
bool json_equal(const Json& a, const Json& b);
// The JSON types an instance of normalized schema n may have ("integer" only when "number" is not
// possible); nullopt when n allows every type.
std::vector<std::string> schema_types(const Json& n);

}  // namespace deepinfer::grammar
