// DSML tool-call grammar construction (see dsml.h): one invoke alternative per tool, one
// parameter item per property (raw and/or JSON value form, as the schema allows), parameters in
// any or schema order with required ones mandatory, extra parameters where additionalProperties
// allows them.
#include "grammar/dsml.h"

#include "grammar/json_number.h"
#include "grammar/json_string.h"
#include "grammar/regex.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {
namespace {

struct Tags {
  std::string calls, invoke, parameter;
};

class DsmlBuilder {
 public:
  DsmlBuilder(Grammar& g, const DsmlOptions& o, int32_t dsml_token)
      : g_(g), a_(g.ast), o_(o), dsml_(dsml_token) {
    tags_ = o.v41_tags ? Tags{" calls", " invoke", " parameter"} : Tags{"tool_calls", "invoke", "parameter"};
  }

  NodeId dsml() { return a_.token(dsml_); }
  NodeId text() {
    if (text_rule_ < 0) text_rule_ = g_.add_rule("text", a_.star(a_.chars(CodepointSet::all())));
    return a_.rule(text_rule_);
  }
  Result<NodeId> invoke(const DsmlTool& tool);
  Result<NodeId> block(std::vector<NodeId> invokes) {
    const NodeId inv = a_.rule(g_.add_rule("invoke", a_.alt(std::move(invokes))));
    const NodeId more = o_.parallel_calls ? a_.star(a_.concat({a_.byte('\n'), inv})) : a_.empty();
    return a_.concat({a_.literal("\n\n<"), dsml(), a_.literal(tags_.calls + ">\n"), inv, more, a_.literal("\n</"),
                      dsml(), a_.literal(tags_.calls + ">")});
  }

 private:
  // "<｜DSML｜parameter name=\"KEY\" string=\"" value-forms "</｜DSML｜parameter>"
  NodeId parameter(NodeId key, NodeId raw, NodeId json) {
    const NodeId forms = a_.alt({a_.concat({a_.literal("true\">"), raw}), a_.concat({a_.literal("false\">"), json})});
    return a_.concat({a_.byte('<'), dsml(), a_.literal(tags_.parameter + " name=\""), key, a_.literal("\" string=\""),
                      forms, a_.literal("</"), dsml(), a_.literal(tags_.parameter + ">")});
  }
  // Raw and JSON (non-string) forms of values of `schema`.
  Result<std::pair<NodeId, NodeId>> value_forms(JsonSchemaCompiler& jc, const Json& schema, const std::string& path) {
    DI_ASSIGN_OR_RETURN(NodeId raw, jc.raw_string_value(schema, path));
    const Json non_string = Json{{"allOf", Json::array({schema, Json{{"type", Json::array({"null", "boolean",
                                                                          "integer", "number", "array", "object"})}}})}};
    DI_ASSIGN_OR_RETURN(NodeId json, jc.value(non_string, path));
    return std::make_pair(raw, json);
  }

  Grammar& g_;
  Ast& a_;
  const DsmlOptions& o_;
  int32_t dsml_;
  Tags tags_;
  int32_t text_rule_ = -1;
};

Result<NodeId> DsmlBuilder::invoke(const DsmlTool& tool) {
  const Json& schema = tool.parameters;
  const std::string path = "tool '" + tool.name + "'";
  if (!schema.is_object()) return invalid_argument("{}: parameters must be a JSON schema object", path);
  for (const char* k : {"anyOf", "oneOf", "allOf", "$ref", "patternProperties", "not", "if"}) {
    if (schema.contains(k)) return unimplemented("keyword '{}' at {} parameters (top level) is not supported in DSML", k, path);
  }
  if (tool.name.empty() || tool.name.find('"') != std::string::npos) {
    return invalid_argument("{}: tool names must be non-empty and contain no '\"'", path);
  }
  JsonSchemaCompiler jc(g_, schema, o_.values);
  const Json props = schema.contains("properties") ? schema["properties"] : Json::object();
  std::vector<std::string> required_names;
  if (schema.contains("required")) for (const auto& r : schema["required"]) required_names.push_back(r.get<std::string>());
  std::vector<NodeId> items;
  std::vector<uint8_t> required;
  std::vector<std::string> names;
  for (const auto& [key, pschema] : props.items()) {
    DI_ASSIGN_OR_RETURN(auto forms, value_forms(jc, pschema, path + "/properties/" + key));
    items.push_back(parameter(a_.literal(key), forms.first, forms.second));
    required.push_back(std::find(required_names.begin(), required_names.end(), key) != required_names.end());
    names.push_back(key);
  }
  for (const auto& r : required_names) {
    if (!props.contains(r)) return unimplemented("{}: required parameter '{}' has no schema in properties", path, r);
  }
  NodeId extra = -1;
  const Json additional = schema.contains("additionalProperties") ? schema["additionalProperties"] : Json(true);
  if (!(additional.is_boolean() && !additional.get<bool>())) {
    DI_ASSIGN_OR_RETURN(Dfa key_chars, regex_dfa("[^\"<>\\n]+", {}));
    DI_ASSIGN_OR_RETURN(Dfa key, dfa_intersect(key_chars, dfa_complement(dfa_from_strings(names)), {}, path));
    DI_ASSIGN_OR_RETURN(auto forms, value_forms(jc, additional, path + "/additionalProperties"));
    extra = parameter(a_.rule(g_.add_rule(path + ":key", a_.dfa(std::make_shared<const Dfa>(std::move(key))))),
                      forms.first, forms.second);
  }
  NodeId params;
  if (o_.any_order && items.size() <= static_cast<size_t>(o_.values.max_any_order_properties)) {
    params = a_.permutation(std::move(items), std::move(required), a_.byte('\n'), extra);
  } else if (o_.any_order && !items.empty()) {
    return unimplemented("{}: any-order parameters for more than {} properties are not supported", path,
                         o_.values.max_any_order_properties);
  } else {
    params = a_.separated(std::move(items), std::move(required), a_.byte('\n'), extra);
  }
  return a_.concat({a_.byte('<'), dsml(), a_.literal(tags_.invoke + " name=\"" + tool.name + "\">\n"), params,
                    a_.literal("\n</"), dsml(), a_.literal(tags_.invoke + ">")});
}

}  // namespace

Result<Grammar> dsml_tool_call_grammar(const std::vector<DsmlTool>& tools, const DsmlOptions& options,
                                       const Vocabulary& vocab) {
  if (tools.empty()) return invalid_argument("DSML grammar: no tools");
  const int32_t dsml = vocab.find_special("\xef\xbd\x9c" "DSML" "\xef\xbd\x9c");
  if (dsml < 0) return invalid_argument("DSML grammar: the vocabulary has no ｜DSML｜ special token");
  int32_t think_end = -1;
  if (options.thinking) {
    think_end = vocab.find_special("</think>");
    if (think_end < 0) return invalid_argument("DSML grammar: the vocabulary has no </think> special token");
  }
  Grammar g;
  const int32_t root = g.add_rule("root");
  DsmlBuilder b(g, options, dsml);
  std::vector<NodeId> invokes;
  for (const DsmlTool& t : tools) {
    DI_ASSIGN_OR_RETURN(NodeId inv, b.invoke(t));
    invokes.push_back(inv);
  }
  DI_ASSIGN_OR_RETURN(NodeId block, b.block(std::move(invokes)));
  const NodeId content = options.allow_content ? b.text() : g.ast.empty();
  NodeId body = g.ast.concat({content, options.tool_choice == DsmlToolChoice::kRequired ? block : g.ast.optional(block)});
  if (options.thinking) body = g.ast.concat({b.text(), g.ast.token(think_end), body});
  g.rules[root].body = body;
  g.root = root;
  return g;
}

}  // namespace deepinfer::grammar
