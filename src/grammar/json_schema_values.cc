// Normalized schema -> AST: type dispatch, anyOf/oneOf groups (with the oneOf disjointness
// prover), enum/const literals (members checked against the sibling keywords by running them
// through a grammar of those keywords), numbers, strings, arrays and the any-JSON rule.
#include <algorithm>

#include "grammar/json_number.h"
#include "grammar/json_schema_impl.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {
namespace {

constexpr int kMaxGroupDepth = 10;
constexpr int kMaxExpansions = 2000;

bool has_type(const std::vector<std::string>& types, const char* t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

// 256 single-byte tokens plus EOS: lets the compiler run byte strings through a grammar.
const std::shared_ptr<const Vocabulary>& byte_vocabulary() {
  static const std::shared_ptr<const Vocabulary> v = [] {
    std::vector<std::string> bytes;
    std::vector<uint8_t> special;
    for (int b = 0; b < 256; ++b) { bytes.emplace_back(1, static_cast<char>(b)); special.push_back(0); }
    bytes.emplace_back("<eos>");
    special.push_back(1);
    return Vocabulary::create(std::move(bytes), std::move(special), 256).value();
  }();
  return v;
}

std::string child(const std::string& path, const std::string& key) { return path + "/" + key; }

}  // namespace

Result<NodeId> JsonSchemaCompiler::Impl::typed(const Json& n, const std::string& path, int depth) {
  if (n.is_boolean()) return n.get<bool>() ? any_value() : g.ast.nothing();
  if (n.contains(kGroups) && !n[kGroups].empty()) return groups(n, path, depth);
  if (n.contains("enum")) return enum_value(n, path);
  const std::vector<std::string> types = schema_types(n);
  std::vector<NodeId> alts;
  if (has_type(types, "number")) {
    DI_ASSIGN_OR_RETURN(NodeId v, number_value(n, path, false));
    alts.push_back(v);
  } else if (has_type(types, "integer")) {
    DI_ASSIGN_OR_RETURN(NodeId v, number_value(n, path, true));
    alts.push_back(v);
  }
  if (has_type(types, "string")) {
    DI_ASSIGN_OR_RETURN(NodeId v, string_value(n, path));
    alts.push_back(v);
  }
  if (has_type(types, "object")) {
    DI_ASSIGN_OR_RETURN(NodeId v, object_value(n, path));
    alts.push_back(v);
  }
  if (has_type(types, "array")) {
    DI_ASSIGN_OR_RETURN(NodeId v, array_value(n, path));
    alts.push_back(v);
  }
  if (has_type(types, "boolean")) alts.push_back(g.ast.alt({g.ast.literal("true"), g.ast.literal("false")}));
  if (has_type(types, "null")) alts.push_back(g.ast.literal("null"));
  return g.ast.alt(std::move(alts));
}

Result<NodeId> JsonSchemaCompiler::Impl::groups(const Json& n, const std::string& path, int depth) {
  if (depth > kMaxGroupDepth) return unimplemented("{}: anyOf/oneOf nested or combined too deeply", path);
  // Combined groups multiply out (allOf of anyOfs): bound the work, fail closed.
  if (o.automata.past_deadline()) return resource_exhausted("{}: compile time limit exceeded", path);
  Json rest = n;
  const Json group = rest[kGroups][0];
  rest[kGroups].erase(0);
  if (rest[kGroups].empty()) rest.erase(kGroups);
  const bool one_of = group.contains("oneOf");
  const Json& branches = group[one_of ? "oneOf" : "anyOf"];
  const std::string gpath = child(path, one_of ? "oneOf" : "anyOf");
  std::vector<NodeId> alts;
  std::vector<Json> merged;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string bpath = child(gpath, std::to_string(i));
    if (++expansions > kMaxExpansions) {
      return resource_exhausted("{}: anyOf/oneOf combinations expand to more than {} alternatives", path,
                                kMaxExpansions);
    }
    DI_ASSIGN_OR_RETURN(Json nb, normalize(branches[i], bpath, 0));
    if (rest.empty()) {
      DI_ASSIGN_OR_RETURN(NodeId v, value(branches[i], bpath));
      alts.push_back(v);
      merged.push_back(std::move(nb));
    } else {
      DI_ASSIGN_OR_RETURN(Json m, merge(rest, nb, bpath, 0));
      DI_ASSIGN_OR_RETURN(NodeId v, typed(m, bpath, depth + 1));
      alts.push_back(v);
      merged.push_back(std::move(m));
    }
  }
  if (one_of && !o.one_of_as_any_of) {
    for (size_t i = 0; i < merged.size(); ++i) {
      for (size_t j = i + 1; j < merged.size(); ++j) {
        DI_ASSIGN_OR_RETURN(bool d, disjoint(merged[i], merged[j], gpath));
        if (!d) {
          return unimplemented("keyword 'oneOf' at {}: branches {} and {} may both match (only provably "
                               "disjoint oneOf is supported)", gpath, i, j);
        }
      }
    }
  }
  return g.ast.alt(std::move(alts));
}

Result<bool> JsonSchemaCompiler::Impl::disjoint(const Json& a, const Json& b, const std::string& path) {
  if ((a.is_boolean() && !a.get<bool>()) || (b.is_boolean() && !b.get<bool>())) return true;
  if (a.is_boolean() || b.is_boolean()) return false;
  const auto ta = schema_types(a), tb = schema_types(b);
  std::vector<std::string> common;
  for (const auto& t : ta) {
    for (const auto& u : tb) {
      if (t == u || (t == "number" && u == "integer") || (t == "integer" && u == "number")) common.push_back(t);
    }
  }
  if (common.empty()) return true;
  if (a.contains("enum") && b.contains("enum")) {
    for (const auto& x : a["enum"]) for (const auto& y : b["enum"]) if (json_equal(x, y)) return false;
    return true;
  }
  // A discriminating property: objects only, required on both sides, with disjoint values.
  if (!std::all_of(common.begin(), common.end(), [](const std::string& t) { return t == "object"; })) return false;
  if (!a.contains("required") || !b.contains("required") || !a.contains("properties") || !b.contains("properties")) {
    return false;
  }
  for (const auto& p : a["required"]) {
    if (!p.is_string()) continue;
    const std::string key = p.get<std::string>();
    const bool in_b = std::any_of(b["required"].begin(), b["required"].end(), [&](const Json& q) { return q == p; });
    if (!in_b || !a["properties"].contains(key) || !b["properties"].contains(key)) continue;
    DI_ASSIGN_OR_RETURN(Json pa, normalize(a["properties"][key], path, 0));
    DI_ASSIGN_OR_RETURN(Json pb, normalize(b["properties"][key], path, 0));
    DI_ASSIGN_OR_RETURN(bool d, disjoint(pa, pb, path));
    if (d) return true;
  }
  return false;
}

Result<NodeId> JsonSchemaCompiler::Impl::enum_value(const Json& n, const std::string& path) {
  DI_ASSIGN_OR_RETURN(std::vector<const Json*> kept, enum_members(n, path));
  std::vector<NodeId> alts;
  for (const Json* v : kept) {
    DI_ASSIGN_OR_RETURN(NodeId lit, literal(*v));
    alts.push_back(lit);
  }
  return g.ast.alt(std::move(alts));
}

Result<std::vector<const Json*>> JsonSchemaCompiler::Impl::enum_members(const Json& n, const std::string& path) {
  Json rest = n;
  rest.erase("enum");
  std::vector<const Json*> kept;
  kept.reserve(n["enum"].size());
  const bool type_only = rest.empty() || (rest.size() == 1 && rest.contains("type"));
  if (type_only) {
    const auto types = schema_types(rest);
    for (const auto& v : n["enum"]) {
      const bool integral = v.is_number() && (draft == SchemaDraft::kDraft4 ? v.is_number_integer()
                                                                            : Decimal::parse(v.dump())->is_integer());
      const bool ok = (v.is_null() && has_type(types, "null")) || (v.is_boolean() && has_type(types, "boolean")) ||
                      (v.is_string() && has_type(types, "string")) || (v.is_array() && has_type(types, "array")) ||
                      (v.is_object() && has_type(types, "object")) ||
                      (v.is_number() && (has_type(types, "number") || (integral && has_type(types, "integer"))));
      if (ok) kept.push_back(&v);
    }
  } else {
    // Members must also satisfy the sibling keywords: run each through their grammar.
    JsonSchemaOptions vo = o;
    vo.flexible_whitespace = false;
    vo.item_separator = ",";
    vo.key_separator = ":";
    vo.any_order = true;
    vo.max_any_order_properties = 16;
    Grammar vg;
    JsonSchemaCompiler sub(vg, doc, vo);
    DI_ASSIGN_OR_RETURN(NodeId root, sub.value(rest, path));
    vg.root = vg.add_rule("root", root);
    auto compiled = CompiledGrammar::compile(std::move(vg), byte_vocabulary());
    if (!compiled.is_ok()) return compiled.status().with_context(path + "/enum");
    for (const auto& v : n["enum"]) {
      Matcher m(*compiled);
      if (m.accept_bytes(v.dump()) && m.can_terminate()) kept.push_back(&v);
    }
  }
  return kept;
}

Result<NodeId> JsonSchemaCompiler::Impl::raw_string(const Json& n, const std::string& path, int depth) {
  if (n.is_boolean()) {
    if (!n.get<bool>()) return g.ast.nothing();
    if (raw_text_rule < 0) raw_text_rule = g.add_rule("raw_text", g.ast.star(g.ast.chars(CodepointSet::all())));
    return g.ast.rule(raw_text_rule);
  }
  if (n.contains(kGroups) && !n[kGroups].empty()) {
    if (depth > kMaxGroupDepth) return unimplemented("{}: anyOf/oneOf nested or combined too deeply", path);
    Json rest = n;
    const Json group = rest[kGroups][0];
    rest[kGroups].erase(0);
    if (rest[kGroups].empty()) rest.erase(kGroups);
    const bool one_of = group.contains("oneOf");
    const Json& branches = group[one_of ? "oneOf" : "anyOf"];
    std::vector<NodeId> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bpath = child(path, (one_of ? "oneOf/" : "anyOf/") + std::to_string(i));
      DI_ASSIGN_OR_RETURN(Json nb, normalize(branches[i], bpath, 0));
      DI_ASSIGN_OR_RETURN(Json m, merge(rest, nb, bpath, 0));
      DI_ASSIGN_OR_RETURN(NodeId v, raw_string(m, bpath, depth + 1));
      alts.push_back(v);
    }
    return g.ast.alt(std::move(alts));
  }
  if (!has_type(schema_types(n), "string")) return g.ast.nothing();
  if (n.contains("enum")) {
    DI_ASSIGN_OR_RETURN(std::vector<const Json*> kept, enum_members(n, path));
    std::vector<NodeId> alts;
    for (const Json* v : kept) if (v->is_string()) alts.push_back(g.ast.literal(v->get<std::string>()));
    return g.ast.alt(std::move(alts));
  }
  StringSpec spec;
  spec.raw = true;
  if (n.contains("minLength")) spec.min_length = static_cast<int64_t>(n["minLength"].get<double>());
  if (n.contains("maxLength")) spec.max_length = static_cast<int64_t>(n["maxLength"].get<double>());
  if (n.contains(kPatterns)) for (const auto& p : n[kPatterns]) spec.patterns.push_back(p.get<std::string>());
  if (n.contains(kFormats)) {
    for (const auto& f : n[kFormats]) {
      if (o.unknown_formats_are_annotations && !format_regex(f.get<std::string>()).is_ok()) continue;
      spec.formats.push_back(f.get<std::string>());
    }
  }
  if (spec.min_length == 0 && spec.max_length < 0 && spec.patterns.empty() && spec.formats.empty()) {
    return raw_string(Json(true), path, depth);
  }
  DI_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa, string_dfa(spec, o.automata, o.strings, path));
  if (dfa->empty()) return g.ast.nothing();
  return g.ast.rule(g.add_rule(path + ":raw", g.ast.dfa(std::move(dfa))));
}

Result<NodeId> JsonSchemaCompiler::Impl::literal(const Json& v) {
  if (v.is_null() || v.is_boolean()) return g.ast.literal(v.dump());
  if (v.is_string()) return g.ast.literal(json_quote(v.get<std::string>()));
  if (v.is_number()) {
    DI_ASSIGN_OR_RETURN(Decimal d, Decimal::parse(v.dump()));
    NumberSpec exact;
    exact.lower = exact.upper = d;
    DI_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa, number_dfa(exact, o.automata, "enum number"));
    return g.ast.dfa(std::move(dfa));
  }
  if (v.is_array()) {
    std::vector<NodeId> parts{g.ast.byte('['), ws()};
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) parts.push_back(item_sep());
      DI_ASSIGN_OR_RETURN(NodeId item, literal(v[i]));
      parts.push_back(item);
    }
    parts.push_back(ws());
    parts.push_back(g.ast.byte(']'));
    return g.ast.concat(std::move(parts));
  }
  std::vector<NodeId> members;
  for (const auto& [k, x] : v.items()) {
    DI_ASSIGN_OR_RETURN(NodeId item, literal(x));
    members.push_back(g.ast.concat({g.ast.literal(json_quote(k)), key_sep(), item}));
  }
  std::vector<uint8_t> required(members.size(), 1);
  const NodeId body = o.any_order && members.size() <= static_cast<size_t>(o.max_any_order_properties)
                          ? g.ast.permutation(members, required, item_sep())
                          : g.ast.separated(members, required, item_sep());
  return g.ast.concat({g.ast.byte('{'), ws(), body, ws(), g.ast.byte('}')});
}

Result<NodeId> JsonSchemaCompiler::Impl::number_value(const Json& n, const std::string& path, bool integer) {
  NumberSpec spec;
  spec.integer = integer;
  auto bound = [&](const char* inclusive, const char* exclusive, std::optional<Decimal>& out,
                   bool& strict, int sign) -> Status {
    if (n.contains(inclusive)) {
      DI_ASSIGN_OR_RETURN(out, Decimal::parse(n[inclusive].dump()));
    }
    if (n.contains(exclusive)) {
      DI_ASSIGN_OR_RETURN(Decimal e, Decimal::parse(n[exclusive].dump()));
      if (!out || sign * e.compare(*out) >= 0) { out = e; strict = true; }
    }
    return Status::ok();
  };
  DI_RETURN_IF_ERROR(bound("minimum", "exclusiveMinimum", spec.lower, spec.lower_exclusive, 1));
  DI_RETURN_IF_ERROR(bound("maximum", "exclusiveMaximum", spec.upper, spec.upper_exclusive, -1));
  if (n.contains(kMultipleOf)) {
    for (const auto& m : n[kMultipleOf]) {
      DI_ASSIGN_OR_RETURN(Decimal d, Decimal::parse(m.dump()));
      spec.multiple_of.push_back(d);
    }
  }
  spec.zero_fraction = draft != SchemaDraft::kDraft4;
  DI_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa, number_dfa(spec, o.automata, path));
  if (dfa->empty()) return g.ast.nothing();
  return g.ast.dfa(std::move(dfa));
}

Result<NodeId> JsonSchemaCompiler::Impl::string_value(const Json& n, const std::string& path) {
  StringSpec spec;
  if (n.contains("minLength")) spec.min_length = static_cast<int64_t>(n["minLength"].get<double>());
  if (n.contains("maxLength")) spec.max_length = static_cast<int64_t>(n["maxLength"].get<double>());
  if (n.contains(kPatterns)) {
    for (const auto& p : n[kPatterns]) {
      if (!p.is_string()) return invalid_argument("{}/pattern: not a string", path);
      spec.patterns.push_back(p.get<std::string>());
    }
  }
  if (n.contains(kFormats)) {
    for (const auto& f : n[kFormats]) {
      if (!f.is_string()) return invalid_argument("{}/format: not a string", path);
      if (o.unknown_formats_are_annotations && !format_regex(f.get<std::string>()).is_ok()) continue;
      spec.formats.push_back(f.get<std::string>());
    }
  }
  if (spec.min_length == 0 && spec.max_length < 0 && spec.patterns.empty() && spec.formats.empty()) {
    return free_string();
  }
  DI_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> dfa, string_dfa(spec, o.automata, o.strings, path));
  if (dfa->empty()) return g.ast.nothing();
  // A rule of its own: its (wide) body states are cached once and shared by all callers.
  const int32_t id = g.add_rule(path + ":string", g.ast.dfa(std::move(dfa)));
  return g.ast.rule(id);
}

Result<NodeId> JsonSchemaCompiler::Impl::array_value(const Json& n, const std::string& path) {
  const Json prefix = n.contains(kPrefix) ? n[kPrefix] : Json::array();
  const Json rest = n.contains(kRest) ? n[kRest] : Json(true);
  const int64_t min = n.contains("minItems") ? static_cast<int64_t>(n["minItems"].get<double>()) : 0;
  const int64_t max = n.contains("maxItems") ? static_cast<int64_t>(n["maxItems"].get<double>()) : -1;
  if (min > o.max_items_bound || max > o.max_items_bound) {
    return unimplemented("{}: minItems/maxItems above {} are not supported", path, o.max_items_bound);
  }
  if (max >= 0 && max < min) return g.ast.nothing();
  std::vector<NodeId> prefix_nodes;
  for (size_t i = 0; i < prefix.size(); ++i) {
    DI_ASSIGN_OR_RETURN(NodeId v, value(prefix[i], child(path, "prefixItems/" + std::to_string(i))));
    prefix_nodes.push_back(v);
  }
  DI_ASSIGN_OR_RETURN(NodeId rest_node, value(rest, child(path, "items")));
  const auto k = static_cast<int64_t>(prefix_nodes.size());
  const int64_t slots = max >= 0 ? max : std::max(k, min);
  NodeId acc = g.ast.empty();
  if (max < 0) {
    acc = g.ast.star(g.ast.concat({item_sep(), rest_node}));
    if (slots == 0) acc = g.ast.optional(g.ast.concat({rest_node, acc}));
  }
  for (int64_t i = slots - 1; i >= 0; --i) {
    const NodeId item = i < k ? prefix_nodes[i] : rest_node;
    const NodeId piece = g.ast.concat({i > 0 ? item_sep() : g.ast.empty(), item, acc});
    acc = i < min ? piece : g.ast.optional(piece);
  }
  return g.ast.concat({g.ast.byte('['), ws(), acc, ws(), g.ast.byte(']')});
}

NodeId JsonSchemaCompiler::Impl::free_string() {
  if (free_string_rule < 0) {
    free_string_rule = g.add_rule("json_string", g.ast.dfa(std::make_shared<const Dfa>(free_string_dfa())));
  }
  return g.ast.rule(free_string_rule);
}

NodeId JsonSchemaCompiler::Impl::any_value() {
  if (any_rule < 0) {
    any_rule = g.add_rule("json_value");
    const NodeId v = g.ast.rule(any_rule);
    const NodeId kv = g.ast.concat({free_string(), key_sep(), v});
    const NodeId obj = g.ast.concat({g.ast.byte('{'), ws(),
                                     g.ast.optional(g.ast.concat({kv, g.ast.star(g.ast.concat({item_sep(), kv}))})),
                                     ws(), g.ast.byte('}')});
    const NodeId arr = g.ast.concat({g.ast.byte('['), ws(),
                                     g.ast.optional(g.ast.concat({v, g.ast.star(g.ast.concat({item_sep(), v}))})),
                                     ws(), g.ast.byte(']')});
    const NodeId num = g.ast.dfa(number_dfa(NumberSpec{}, o.automata, "number").value());
    g.rules[any_rule].body = g.ast.alt({obj, arr, free_string(), num, g.ast.literal("true"), g.ast.literal("false"),
                                        g.ast.literal("null")});
  }
  return g.ast.rule(any_rule);
}

}  // namespace deepinfer::grammar
