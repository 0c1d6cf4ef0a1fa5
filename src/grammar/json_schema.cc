// JSON schema front end: keyword check, $ref resolution (local JSON pointers), normalization and
// allOf merging, the per-normalized-schema rule memo, and the public entry points.
#include "grammar/json_schema.h"

#include <algorithm>
#include <set>

#include "grammar/json_number.h"
#include "grammar/json_schema_impl.h"

namespace deepinfer::grammar {
namespace {

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id",
    "readOnly", "writeOnly", "deprecated", "contentEncoding", "contentMediaType", "contentSchema",
    "$anchor", "$vocabulary", "discriminator", "nullable", "markdownDescription", "enumDescriptions",
    "$defs", "definitions", "$dynamicAnchor", "$recursiveAnchor", "xml", "externalDocs"};

const std::set<std::string, std::less<>> kUnsupported = {
    "not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas", "contains",
    "minContains", "maxContains", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
    "$dynamicRef", "$recursiveRef", "uniqueItems"};

const std::set<std::string, std::less<>> kTypes = {"null", "boolean", "integer", "number", "string", "array", "object"};

std::string child(const std::string& path, const std::string& key) { return path + "/" + key; }

bool is_min_keyword(const std::string& k) {
  return k == "minLength" || k == "minItems" || k == "minProperties" || k == "minimum" || k == "exclusiveMinimum";
}
bool is_max_keyword(const std::string& k) {
  return k == "maxLength" || k == "maxItems" || k == "maxProperties" || k == "maximum" || k == "exclusiveMaximum";
}

Result<Decimal> to_decimal(const Json& v, const std::string& path) {
  if (!v.is_number()) return invalid_argument("{}: expected a number", path);
  return Decimal::parse(v.dump());
}

std::vector<std::string> type_list(const Json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  else if (t.is_array()) for (const auto& x : t) if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

std::vector<std::string> intersect_types(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  auto has = [](const std::vector<std::string>& v, const char* t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  for (const auto& t : a) {
    if (has(b, t.c_str())) out.push_back(t);
    else if (t == "number" && has(b, "integer")) out.push_back("integer");
    else if (t == "integer" && has(b, "number")) out.push_back("integer");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    auto da = Decimal::parse(a.dump()), db = Decimal::parse(b.dump());
    return da.is_ok() && db.is_ok() && da->compare(*db) == 0;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k) || !json_equal(v, b[k])) return false;
    }
    return true;
  }
  return a == b;
}

std::vector<std::string> schema_types(const Json& n) {
  if (n.is_boolean()) return n.get<bool>() ? std::vector<std::string>(kTypes.begin(), kTypes.end()) : std::vector<std::string>{};
  std::vector<std::string> types = n.contains("type") ? type_list(n["type"])
                                                      : std::vector<std::string>(kTypes.begin(), kTypes.end());
  if (n.contains("enum")) {
    std::vector<std::string> from_enum;
    for (const auto& v : n["enum"]) {
      if (v.is_null()) from_enum.push_back("null");
      else if (v.is_boolean()) from_enum.push_back("boolean");
      else if (v.is_number()) from_enum.push_back(Decimal::parse(v.dump())->is_integer() ? "integer" : "number");
      else if (v.is_string()) from_enum.push_back("string");
      else if (v.is_array()) from_enum.push_back("array");
      else from_enum.push_back("object");
    }
    types = intersect_types(types, from_enum);
  }
  return types;
}

JsonSchemaCompiler::Impl::Impl(Grammar& grammar, const Json& document, const JsonSchemaOptions& options)
    : g(grammar), doc(document), o(options), draft(options.draft) {
  if (draft == SchemaDraft::kAuto) {
    draft = SchemaDraft::k2020;
    if (doc.is_object() && doc.contains("$schema") && doc["$schema"].is_string()) {
      const std::string s = doc["$schema"].get<std::string>();
      if (s.find("draft-04") != std::string::npos || s.find("draft-03") != std::string::npos) draft = SchemaDraft::kDraft4;
      else if (s.find("draft-06") != std::string::npos || s.find("draft-07") != std::string::npos) draft = SchemaDraft::kDraft7;
    }
  }
}

Result<const Json*> JsonSchemaCompiler::Impl::resolve_ref(const std::string& ref, const std::string& path) const {
  if (ref == "#") return &doc;
  if (ref.rfind("#/", 0) != 0) {
    return unimplemented("$ref '{}' at {}: only local references (#/...) are supported", ref, path);
  }
  const Json* cur = &doc;
  size_t pos = 2;
  while (pos <= ref.size()) {
    size_t end = ref.find('/', pos);
    if (end == std::string::npos) end = ref.size();
    std::string token;
    for (size_t i = pos; i < end; ++i) {
      if (ref[i] == '~' && i + 1 < end) { token.push_back(ref[i + 1] == '1' ? '/' : '~'); ++i; }
      else if (ref[i] == '%' && i + 2 < end + 0 && std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
        token.push_back(static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16)));
        i += 2;
      } else {
        token.push_back(ref[i]);
      }
    }
    if (cur->is_object() && cur->contains(token)) {
      cur = &(*cur)[token];
    } else if (cur->is_array() && !token.empty() && std::all_of(token.begin(), token.end(), ::isdigit) &&
               std::stoul(token) < cur->size()) {
      cur = &(*cur)[std::stoul(token)];
    } else {
      return invalid_argument("$ref '{}' at {} does not resolve", ref, path);
    }
    pos = end + 1;
  }
  return cur;
}

Result<Json> JsonSchemaCompiler::Impl::normalize(const Json& schema, const std::string& path, int depth) {
  if (schema.is_boolean()) return schema;
  if (!schema.is_object()) return invalid_argument("{}: a schema must be an object or a boolean", path);
  if (depth > 40) return unimplemented("{}: allOf/$ref nesting deeper than 40 (recursive allOf?)", path);
  std::vector<std::pair<Json, std::string>> members;  // allOf members (already resolved)
  if (schema.contains("$ref")) {
    if (!schema["$ref"].is_string()) return invalid_argument("{}/$ref: not a string", path);
    const std::string ref = schema["$ref"].get<std::string>();
    DI_ASSIGN_OR_RETURN(const Json* target, resolve_ref(ref, path));
    if (draft != SchemaDraft::k2020) return normalize(*target, ref, depth + 1);  // siblings ignored
    members.emplace_back(*target, ref);
  }
  Json out = Json::object();
  Json branch = Json::object();
  bool has_branch = false;
  for (const auto& [key, v] : schema.items()) {
    if (key == "$ref" || kAnnotations.count(key)) continue;
    if (key.rfind("$di:", 0) == 0) { out[key] = v; continue; }  // already normalized
    if (kUnsupported.count(key)) {
      if (key == "uniqueItems" && v.is_boolean() && !v.get<bool>()) continue;
      return unimplemented("keyword '{}' at {} is not supported", key, path);
    }
    if (key == "type") {
      for (const auto& t : type_list(v)) {
        if (!kTypes.count(t)) return invalid_argument("{}/type: unknown type '{}'", path, t);
      }
      out["type"] = type_list(v);
    } else if (key == "const" || key == "enum") {
      Json values = key == "const" ? Json::array({v}) : v;
      if (!values.is_array()) return invalid_argument("{}/enum: not an array", path);
      if (out.contains("enum")) {
        Json both = Json::array();
        for (const auto& x : out["enum"]) {
          for (const auto& y : values) if (json_equal(x, y)) { both.push_back(x); break; }
        }
        values = both;
      }
      out["enum"] = values;
    } else if (key == "properties" || key == "patternProperties") {
      if (!v.is_object()) return invalid_argument("{}/{}: not an object", path, key);
      if (key == "properties") out["properties"] = v;
      else branch["patterns"] = v;
      has_branch = true;
    } else if (key == "additionalProperties") {
      branch["additional"] = v;
      has_branch = true;
    } else if (key == "required") {
      if (!v.is_array()) return invalid_argument("{}/required: not an array", path);
      out["required"] = v;
    } else if (key == "items") {
      if (v.is_array()) {
        out[kPrefix] = v;
        out[kRest] = schema.contains("additionalItems") ? schema["additionalItems"] : Json(true);
      } else {
        out[kRest] = v;
      }
    } else if (key == "prefixItems") {
      out[kPrefix] = v;
    } else if (key == "additionalItems") {
      continue;  // only meaningful next to array-form items (handled there)
    } else if (key == "pattern") {
      out[kPatterns] = Json::array({v});
    } else if (key == "format") {
      out[kFormats] = Json::array({v});
    } else if (key == "multipleOf") {
      out[kMultipleOf] = Json::array({v});
    } else if (key == "anyOf" || key == "oneOf") {
      if (!v.is_array() || v.empty()) return invalid_argument("{}/{}: must be a non-empty array", path, key);
      out[kGroups] = Json::array({Json{{key, v}}});
    } else if (key == "allOf") {
      if (!v.is_array()) return invalid_argument("{}/allOf: not an array", path);
      for (size_t i = 0; i < v.size(); ++i) members.emplace_back(v[i], child(path, "allOf/" + std::to_string(i)));
    } else if (is_min_keyword(key) || is_max_keyword(key) || key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (v.is_boolean() && (key == "exclusiveMinimum" || key == "exclusiveMaximum")) {
        // Draft 4: a flag on minimum/maximum.
        const char* bound = key == "exclusiveMinimum" ? "minimum" : "maximum";
        if (v.get<bool>() && schema.contains(bound)) out[key] = schema[bound];
        continue;
      }
      if (!v.is_number()) return invalid_argument("{}/{}: not a number", path, key);
      out[key] = v;
    }
    // Unknown keywords are annotations (JSON schema ignores them).
  }
  // Draft-4 exclusive flags replace the inclusive bound.
  for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (schema.contains(k) && schema[k].is_boolean() && schema[k].get<bool>()) {
      out.erase(std::string(k) == "exclusiveMinimum" ? "minimum" : "maximum");
    }
  }
  // A schema normalized before already carries its branches (properties are listed there).
  if (has_branch && !schema.contains(kBranches)) {
    Json names = Json::array();
    if (out.contains("properties")) for (const auto& [k, s] : out["properties"].items()) names.push_back(k);
    branch["names"] = names;
    if (!branch.contains("patterns")) branch["patterns"] = Json::object();
    out[kBranches] = Json::array({branch});
  }
  Json result = out;
  for (const auto& [m, mpath] : members) {
    DI_ASSIGN_OR_RETURN(Json nm, normalize(m, mpath, depth + 1));
    DI_ASSIGN_OR_RETURN(result, merge(result, nm, path, depth + 1));
  }
  return result;
}

Result<Json> JsonSchemaCompiler::Impl::merge(const Json& a, const Json& b, const std::string& path, int depth) {
  if ((a.is_boolean() && !a.get<bool>()) || (b.is_boolean() && !b.get<bool>())) return Json(false);
  if (a.is_boolean()) return b;
  if (b.is_boolean()) return a;
  Json out = a;
  for (const auto& [key, vb] : b.items()) {
    if (key == kPrefix || key == kRest) continue;  // merged below
    if (!out.contains(key)) { out[key] = vb; continue; }
    Json& va = out[key];
    if (key == "type") {
      va = intersect_types(type_list(va), type_list(vb));
    } else if (key == "enum") {
      Json both = Json::array();
      for (const auto& x : va) for (const auto& y : vb) if (json_equal(x, y)) { both.push_back(x); break; }
      va = both;
    } else if (key == "properties") {
      for (const auto& [k, s] : vb.items()) {
        if (va.contains(k)) va[k] = Json{{"allOf", Json::array({va[k], s})}};
        else va[k] = s;
      }
    } else if (key == "required" || key == kBranches || key == kGroups || key == kPatterns || key == kFormats ||
               key == kMultipleOf) {
      for (const auto& x : vb) va.push_back(x);
    } else if (is_min_keyword(key) || is_max_keyword(key)) {
      DI_ASSIGN_OR_RETURN(Decimal da, to_decimal(va, path));
      DI_ASSIGN_OR_RETURN(Decimal db, to_decimal(vb, path));
      const bool take_b = is_min_keyword(key) ? db.compare(da) > 0 : db.compare(da) < 0;
      if (take_b) va = vb;
    }
  }
  // Arrays: position i of the merge is allOf(item_a(i), item_b(i)).
  if (a.contains(kPrefix) || b.contains(kPrefix) || a.contains(kRest) || b.contains(kRest)) {
    const Json empty = Json::array();
    const Json& pa = a.contains(kPrefix) ? a[kPrefix] : empty;
    const Json& pb = b.contains(kPrefix) ? b[kPrefix] : empty;
    const Json ra = a.contains(kRest) ? a[kRest] : Json(true);
    const Json rb = b.contains(kRest) ? b[kRest] : Json(true);
    Json prefix = Json::array();
    for (size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
      prefix.push_back(Json{{"allOf", Json::array({i < pa.size() ? pa[i] : ra, i < pb.size() ? pb[i] : rb})}});
    }
    if (!prefix.empty()) out[kPrefix] = prefix;
    out[kRest] = Json{{"allOf", Json::array({ra, rb})}};
  }
  (void)depth;
  return out;
}

Result<NodeId> JsonSchemaCompiler::Impl::value(const Json& schema, const std::string& path) {
  if (o.automata.past_deadline()) return resource_exhausted("{}: compile time limit exceeded", path);
  if (schema.is_boolean()) return schema.get<bool>() ? any_value() : g.ast.nothing();
  DI_ASSIGN_OR_RETURN(Json n, normalize(schema, path, 0));
  if (n.is_boolean()) return n.get<bool>() ? any_value() : g.ast.nothing();
  if (n.empty()) return any_value();
  const std::string key = n.dump();
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  // Schemas that may contain subschemas get a rule (created before its body, so recursive
  // references find it); scalar schemas are plain expressions, inlined where used.
  const auto types = schema_types(n);
  const bool structured = n.contains(kGroups) || (!n.contains("enum") && std::any_of(types.begin(), types.end(),
      [](const std::string& t) { return t == "object" || t == "array"; }));
  if (!structured) {
    DI_ASSIGN_OR_RETURN(NodeId node, typed(n, path, 0));
    memo.emplace(key, node);
    return node;
  }
  const int32_t id = g.add_rule(path);
  const NodeId call = g.ast.rule(id);
  memo.emplace(key, call);
  DI_ASSIGN_OR_RETURN(NodeId body, typed(n, path, 0));
  g.rules[id].body = body;
  return call;
}

NodeId JsonSchemaCompiler::Impl::ws() {
  if (!o.flexible_whitespace) return g.ast.empty();
  CodepointSet s;
  for (uint32_t c : {uint32_t{' '}, uint32_t{'\t'}, uint32_t{'\n'}, uint32_t{'\r'}}) s.add(c, c);
  return g.ast.repeat(g.ast.chars(s), 0, o.max_whitespace);
}

NodeId JsonSchemaCompiler::Impl::item_sep() {
  if (!o.flexible_whitespace) return g.ast.literal(o.item_separator);
  return g.ast.concat({ws(), g.ast.byte(','), ws()});
}

NodeId JsonSchemaCompiler::Impl::key_sep() {
  if (!o.flexible_whitespace) return g.ast.literal(o.key_separator);
  return g.ast.concat({ws(), g.ast.byte(':'), ws()});
}

JsonSchemaCompiler::JsonSchemaCompiler(Grammar& grammar, const Json& document, const JsonSchemaOptions& options)
    : impl_(std::make_unique<Impl>(grammar, document, options)) {}
JsonSchemaCompiler::~JsonSchemaCompiler() = default;

Result<NodeId> JsonSchemaCompiler::value(const Json& schema, const std::string& path) {
  return impl_->value(schema, path);
}
Result<NodeId> JsonSchemaCompiler::raw_string_value(const Json& schema, const std::string& path) {
  DI_ASSIGN_OR_RETURN(Json n, impl_->normalize(schema, path, 0));
  return impl_->raw_string(n, path, 0);
}
NodeId JsonSchemaCompiler::ws() { return impl_->ws(); }

Result<Grammar> json_schema_to_grammar(const Json& schema, const JsonSchemaOptions& options) {
  Grammar g;
  JsonSchemaCompiler compiler(g, schema, options);
  const int32_t root = g.add_rule("root");
  DI_ASSIGN_OR_RETURN(NodeId v, compiler.value(schema, "#"));
  g.rules[root].body = g.ast.concat({compiler.ws(), v, compiler.ws()});
  g.root = root;
  return g;
}

Result<Grammar> json_schema_to_grammar(std::string_view schema_text, const JsonSchemaOptions& options) {
  Json schema = Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return invalid_argument("JSON schema is not valid JSON");
  return json_schema_to_grammar(schema, options);
}

}  // namespace deepinfer::grammar
