// Objects: named members (properties + required) in schema order or any order, and "extra"
// members whose key language is partitioned by patternProperties (each combination of matching /
// non-matching patterns, minus the named keys) so every key gets exactly the value schema the
// spec assigns to it, across all merged allOf branches. min/maxProperties bound the member count.
#include <map>

#include "grammar/json_schema_impl.h"

namespace deepinfer::grammar {
namespace {

constexpr size_t kMaxPatterns = 6;

struct PatternRule {
  std::string pattern;
  Json schema;
  size_t branch;
};

}  // namespace

Result<NodeId> JsonSchemaCompiler::Impl::object_value(const Json& n, const std::string& path) {
  const Json props = n.contains("properties") ? n["properties"] : Json::object();
  const Json branches = n.contains(kBranches) ? n[kBranches] : Json::array();
  std::vector<std::string> names;
  for (const auto& [k, s] : props.items()) names.push_back(k);
  std::vector<std::string> required_names;
  if (n.contains("required")) {
    for (const auto& r : n["required"]) {
      if (!r.is_string()) return invalid_argument("{}/required: entries must be strings", path);
      required_names.push_back(r.get<std::string>());
      if (std::find(names.begin(), names.end(), required_names.back()) == names.end()) names.push_back(required_names.back());
    }
  }
  std::vector<PatternRule> patterns;
  for (size_t b = 0; b < branches.size(); ++b) {
    for (const auto& [p, s] : branches[b]["patterns"].items()) patterns.push_back({p, s, b});
  }
  if (patterns.size() > kMaxPatterns) {
    return unimplemented("keyword 'patternProperties' at {}: more than {} patterns", path, kMaxPatterns);
  }
  // Key automata of each pattern (quoted canonical strings whose value matches), built lazily.
  std::vector<std::shared_ptr<const Dfa>> held;  // keeps the automata pattern_dfa hands out alive
  auto pattern_dfa = [&](const std::string& p) -> Result<const Dfa*> {
    StringSpec spec;
    spec.patterns.push_back(p);
    DI_ASSIGN_OR_RETURN(std::shared_ptr<const Dfa> d, string_dfa(spec, o.automata, o.strings, path + "/patternProperties"));
    held.push_back(d);
    return d.get();
  };
  // Named members.
  std::vector<NodeId> items;
  std::vector<uint8_t> required;
  for (const std::string& k : names) {
    Json list = Json::array();
    if (props.contains(k)) list.push_back(props[k]);
    // Matching patterns apply to named keys too; additionalProperties only to keys a branch
    // neither names nor matches.
    for (size_t b = 0; b < branches.size(); ++b) {
      bool matched = false;
      for (const PatternRule& pr : patterns) {
        if (pr.branch != b) continue;
        DI_ASSIGN_OR_RETURN(const Dfa* d, pattern_dfa(pr.pattern));
        if (d->matches(json_quote(k))) { list.push_back(pr.schema); matched = true; }
      }
      const Json& own = branches[b]["names"];
      const bool named = std::find(own.begin(), own.end(), Json(k)) != own.end();
      if (!named && !matched && branches[b].contains("additional")) list.push_back(branches[b]["additional"]);
    }
    const std::string kpath = path + "/properties/" + k;
    NodeId v;
    if (list.empty()) { v = any_value(); }
    else if (list.size() == 1) { DI_ASSIGN_OR_RETURN(v, value(list[0], kpath)); }
    else { DI_ASSIGN_OR_RETURN(v, value(Json{{"allOf", list}}, kpath)); }
    items.push_back(g.ast.concat({g.ast.literal(json_quote(k)), key_sep(), v}));
    required.push_back(std::find(required_names.begin(), required_names.end(), k) != required_names.end());
  }
  // Extra members: one alternative per combination of matched patterns.
  std::vector<NodeId> extras;
  std::vector<std::string> quoted_names;
  for (const auto& k : names) quoted_names.push_back(json_quote(k));
  const Dfa not_named = dfa_complement(dfa_from_strings(quoted_names));
  for (uint32_t mask = 0; mask < (1u << patterns.size()); ++mask) {
    Json list = Json::array();
    bool impossible = false;
    for (size_t b = 0; b < branches.size(); ++b) {
      bool any = false;
      for (size_t j = 0; j < patterns.size(); ++j) any |= (mask >> j & 1u) && patterns[j].branch == b;
      if (!any && branches[b].contains("additional")) list.push_back(branches[b]["additional"]);
    }
    for (size_t j = 0; j < patterns.size(); ++j) if (mask >> j & 1u) list.push_back(patterns[j].schema);
    for (const auto& s : list) impossible |= s.is_boolean() && !s.get<bool>();
    if (impossible) continue;
    NodeId key;
    if (patterns.empty() && names.empty()) {
      key = free_string();
    } else {
      DI_ASSIGN_OR_RETURN(Dfa kd, dfa_intersect(canonical_string_dfa(), not_named, o.automata, path));
      for (size_t j = 0; j < patterns.size() && !kd.empty(); ++j) {
        DI_ASSIGN_OR_RETURN(const Dfa* pd, pattern_dfa(patterns[j].pattern));
        if (mask >> j & 1u) {
          DI_ASSIGN_OR_RETURN(kd, dfa_intersect(kd, *pd, o.automata, path));
        } else {
          DI_ASSIGN_OR_RETURN(kd, dfa_intersect(kd, dfa_complement(*pd), o.automata, path));
        }
      }
      if (kd.empty()) continue;
      key = g.ast.rule(g.add_rule(path + ":key", g.ast.dfa(std::make_shared<const Dfa>(std::move(kd)))));
    }
    NodeId v;
    const std::string xpath = path + "/additionalProperties";
    if (list.empty()) { v = any_value(); }
    else if (list.size() == 1) { DI_ASSIGN_OR_RETURN(v, value(list[0], xpath)); }
    else { DI_ASSIGN_OR_RETURN(v, value(Json{{"allOf", list}}, xpath)); }
    extras.push_back(g.ast.concat({key, key_sep(), v}));
  }
  const int32_t min_count = n.contains("minProperties") ? static_cast<int32_t>(n["minProperties"].get<double>()) : 0;
  int32_t max_count = n.contains("maxProperties") ? static_cast<int32_t>(n["maxProperties"].get<double>()) : kUnbounded;
  if (extras.empty() && max_count >= static_cast<int32_t>(items.size())) max_count = kUnbounded;
  if (max_count >= 0 && max_count < min_count) return g.ast.nothing();
  if (!extras.empty() && (min_count > 64 || max_count > 64)) {
    return unimplemented("{}: minProperties/maxProperties above 64 with additional properties are not supported", path);
  }
  const NodeId extra = extras.empty() ? NodeId{-1} : g.ast.alt(std::move(extras));
  NodeId members;
  if (o.any_order && !items.empty()) {
    if (items.size() > static_cast<size_t>(o.max_any_order_properties)) {
      return unimplemented("{}: any-order objects with more than {} properties are not supported", path,
                           o.max_any_order_properties);
    }
    members = g.ast.permutation(std::move(items), std::move(required), item_sep(), extra, min_count, max_count);
  } else {
    members = g.ast.separated(std::move(items), std::move(required), item_sep(), extra, min_count, max_count);
  }
  return g.ast.concat({g.ast.byte('{'), ws(), members, ws(), g.ast.byte('}')});
}

}  // namespace deepinfer::grammar
