// JSON string automata: the canonical character mapper, counted-length DFAs built directly (a
// per-character automaton times a counter, no NFA unrolling), pattern/format intersection, the
// free and canonical string DFAs, quoting, and the format regex table.
#include "grammar/json_string.h"

#include <map>

#include <fmt/format.h>

#include "grammar/json_number.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {

namespace {
const char* short_escape(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

std::string escape_of(uint32_t cp) {
  if (const char* e = short_escape(cp)) return e;
  return fmt::format("\\u{:04x}", cp);
}

CodepointSet raw_safe() {
  CodepointSet s = CodepointSet::range(0x20, kMaxCodepoint);
  return s.minus(CodepointSet::single('"')).minus(CodepointSet::single('\\'));
}

Result<Dfa> compile_leaf(Ast& ast, NodeId root, const AutomatonLimits& limits, const std::string& what) {
  return DfaBuilder::from_ast(ast, root, limits, [](int32_t) { return -1; }, what);
}

// One canonical JSON character (or one raw UTF-8 character).
const Dfa& one_char_dfa(bool raw) {
  static const Dfa json_dfa = [] {
    Ast ast;
    return compile_leaf(ast, json_chars(ast, CodepointSet::all()), {}, "json char").value();
  }();
  static const Dfa raw_dfa = [] {
    Ast ast;
    return compile_leaf(ast, ast.chars(CodepointSet::all()), {}, "char").value();
  }();
  return raw ? raw_dfa : json_dfa;
}

// Characters, between min and max (-1: unbounded) of them.
Dfa counted_chars(int64_t min, int64_t max, bool raw_text = false) {
  const Dfa& c = one_char_dfa(raw_text);
  const int32_t n = c.n_states();
  const int64_t top = max >= 0 ? max : min;  // counter states 0..top
  RawDfa raw;
  raw.n_classes = c.n_classes();
  for (int b = 0; b < 256; ++b) raw.byte_class[b] = c.byte_class(static_cast<uint8_t>(b));
  for (int64_t k = 0; k <= top; ++k) {
    for (int32_t s = 0; s < n; ++s) raw.add_state();
  }
  auto id = [&](int64_t k, int32_t s) { return static_cast<int32_t>(k * n + s); };
  for (int64_t k = 0; k <= top; ++k) {
    for (int32_t s = 0; s < n; ++s) {
      if (c.accepting(s)) continue;  // a complete character moves to the next counter slot
      for (int32_t cls = 0; cls < c.n_classes(); ++cls) {
        const int32_t t = c.next_class(s, cls);
        int32_t target = -1;
        if (t >= 0 && !c.accepting(t)) target = id(k, t);
        else if (t >= 0 && (max < 0 || k < max)) target = id(std::min(k + 1, top), c.start());
        raw.table[static_cast<size_t>(id(k, s)) * raw.n_classes + cls] = target;
      }
    }
    if (k >= min) raw.accepting[id(k, c.start())] = 1;
  }
  raw.start = id(0, c.start());
  return DfaBuilder::trim(raw);  // minimal by construction (distinct counters, minimal char DFA)
}

// '"' body '"', built on the automaton: a new start reads '"' into the body and every accepting
// body state reads '"' into a new final state. Canonical bodies never read a raw '"' at a
// character boundary, so no transition is overwritten.
Dfa wrap_in_quotes(const Dfa& body) {
  RawDfa raw = DfaBuilder::to_raw(body);
  // Give '"' a class of its own (a copy of its old column) so only it gets the new edges.
  const int32_t old_cls = raw.byte_class['"'];
  const int32_t q = raw.n_classes;
  std::vector<int32_t> table;
  table.reserve(static_cast<size_t>(raw.n_states()) * (q + 1));
  for (int32_t s = 0; s < raw.n_states(); ++s) {
    for (int32_t c = 0; c < q; ++c) table.push_back(raw.table[static_cast<size_t>(s) * q + c]);
    table.push_back(raw.table[static_cast<size_t>(s) * q + old_cls]);
  }
  raw.table = std::move(table);
  raw.n_classes = q + 1;
  raw.byte_class['"'] = static_cast<uint8_t>(q);
  const int32_t start = raw.add_state(), final_state = raw.add_state();
  raw.table[static_cast<size_t>(start) * raw.n_classes + q] = raw.start;
  for (int32_t s = 0; s < body.n_states(); ++s) {
    if (!raw.accepting[s]) continue;
    raw.accepting[s] = 0;
    raw.table[static_cast<size_t>(s) * raw.n_classes + q] = final_state;
  }
  raw.accepting[final_state] = 1;
  raw.start = start;
  return DfaBuilder::trim(raw);
}

DfaCache& string_cache() {
  static DfaCache cache;
  return cache;
}
}  // namespace

NodeId json_chars(Ast& ast, const CodepointSet& set) {
  std::vector<NodeId> alts;
  const CodepointSet raw = set.intersected(raw_safe());
  if (!raw.empty()) alts.push_back(ast.chars(raw));
  for (uint32_t cp : {uint32_t{'"'}, uint32_t{'\\'}}) {
    if (set.contains(cp)) alts.push_back(ast.literal(escape_of(cp)));
  }
  const CodepointSet controls = set.intersected(CodepointSet::range(0, 0x1F));
  for (const auto& [lo, hi] : controls.ranges()) {
    for (uint32_t cp = lo; cp <= hi; ++cp) alts.push_back(ast.literal(escape_of(cp)));
  }
  return ast.alt(std::move(alts));
}

std::string json_quote(std::string_view utf8) {
  std::string out = "\"";
  for (char ch : utf8) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\') out += escape_of(c);
    else out.push_back(ch);
  }
  out.push_back('"');
  return out;
}

const Dfa& free_string_dfa() {
  static const Dfa dfa =
      regex_dfa(R"re("([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*")re", {}).value();
  return dfa;
}

const Dfa& canonical_string_dfa() {
  static const Dfa dfa = wrap_in_quotes(counted_chars(0, -1));
  return dfa;
}

Result<std::string> format_regex(std::string_view format) {
  static const std::map<std::string, std::string, std::less<>> kFormats = [] {
    // RFC 3339 full-date: February 29 only in leap years (divisible by 4, centuries by 400).
    const std::string leap_year = R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00))";
    const std::string date =
        R"((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|)" +
        leap_year + "-02-29)";
    // RFC 3339 full-time. A leap second is 23:59:60 UTC: accepted as 23:59:60 with a zero offset
    // only (at other offsets it is valid at one local minute each; refusing those is a false
    // negative, never an invalid time accepted).
    const std::string offset = R"((?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
    const std::string time = R"((?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?)" + offset +
                             R"(|23:59:60(?:\.\d+)?(?:[Zz]|[+-]00:00)))";
    // ISO 8601 duration as RFC 3339 Appendix A has it: P + date part (days; months [days]; years
    // [months [days]]) and/or T + time part (hours [minutes [seconds]]; minutes [seconds];
    // seconds), or weeks alone.
    const std::string dur_time = R"(T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))";
    const std::string dur_date = R"((?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?))";
    const std::string duration = "P(?:" + dur_date + "(?:" + dur_time + ")?|" + dur_time + "|[0-9]+W)";
    const std::string label = R"([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)";  // <= 63 chars
    const std::string atom = R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)";
    const std::string h = "[0-9a-fA-F]{1,4}";
    const std::string v4 = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})";
    std::string v6 = "(?:" + h + ":){7}" + h + "|(?:" + h + ":){1,7}:|:(?::" + h + "){1,7}|::";
    for (int k = 1; k <= 6; ++k) {
      v6 += "|(?:" + h + ":){" + std::to_string(k) + "}(?::" + h + "){1," + std::to_string(7 - k) + "}";
    }
    v6 += "|(?:" + h + ":){6}" + v4 + "|::(?:" + h + ":){0,5}" + v4;
    for (int k = 1; k <= 5; ++k) {
      v6 += "|(?:" + h + ":){" + std::to_string(k) + "}:(?:" + h + ":){0," + std::to_string(5 - k) + "}" + v4;
    }
    // RFC 3986 §3: scheme ":" hier-part ["?" query] ["#" fragment]; brackets only around an
    // IP-literal host (IPv6 or IPvFuture), "%" only as a percent-encoded octet.
    const std::string pct = "%[0-9A-Fa-f]{2}";
    const std::string unreserved_sub = R"(A-Za-z0-9\-._~!$&'()*+,;=)";  // inside a class
    const std::string pchar = "(?:[" + unreserved_sub + ":@]|" + pct + ")";
    const std::string userinfo = "(?:[" + unreserved_sub + ":]|" + pct + ")*";
    const std::string ip_literal = R"(\[(?:)" + v6 + R"(|[Vv][0-9A-Fa-f]+\.[)" + unreserved_sub + R"(:]+)\])";
    const std::string host = "(?:" + ip_literal + "|(?:[" + unreserved_sub + "]|" + pct + ")*)";
    const std::string authority = "(?:" + userinfo + "@)?" + host + "(?::[0-9]*)?";
    const std::string path_rootless = pchar + "+(?:/" + pchar + "*)*";
    const std::string hier = "(?://" + authority + "(?:/" + pchar + "*)*|/(?:" + path_rootless + ")?|" + path_rootless + ")?";
    const std::string tail = "(?:" + pchar + "|[/?])*";
    const std::string uri = R"([A-Za-z][A-Za-z0-9+.\-]*:)" + hier + R"((?:\?)" + tail + ")?(?:#" + tail + ")?";
    return std::map<std::string, std::string, std::less<>>{
        {"date", date},
        {"time", time},
        {"date-time", date + "[Tt]" + time},
        {"duration", duration},
        {"email", atom + R"((?:\.)" + atom + ")*@(?:" + label + R"(\.)*)" + label},
        {"hostname", label + R"((?:\.)" + label + ")*"},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"uri", uri},
        {"ipv4", v4},
        {"ipv6", v6},
    };
  }();
  auto it = kFormats.find(format);
  if (it == kFormats.end()) return unimplemented("format '{}' is not supported", format);
  return it->second;
}

Result<std::shared_ptr<const Dfa>> string_dfa(const StringSpec& spec, const AutomatonLimits& limits,
                                              const StringLimits& string_limits, const std::string& what) {
  if (spec.min_length > string_limits.max_length_bound || spec.max_length > string_limits.max_length_bound) {
    return unimplemented("{}: string length bounds above {} are not supported", what,
                         string_limits.max_length_bound);
  }
  std::string key = fmt::format("{}|{}|{}", spec.raw ? 'r' : 'j', spec.min_length, spec.max_length);
  for (const auto& p : spec.patterns) key += fmt::format("|p{}:{}", p.size(), p);
  for (const auto& f : spec.formats) key += fmt::format("|f{}:{}", f.size(), f);
  if (auto hit = string_cache().find(key)) return hit;
  if (spec.max_length >= 0 && spec.max_length < spec.min_length) return std::make_shared<const Dfa>();
  Dfa body = counted_chars(spec.min_length, spec.max_length, spec.raw);
  const CharMapper mapper = spec.raw ? CharMapper(raw_chars) : CharMapper(json_chars);
  for (const std::string& p : spec.patterns) {
    Ast ast;
    RegexOptions options;
    options.search = true;
    auto root = parse_regex(p, ast, options, mapper);
    if (!root.is_ok()) return root.status().with_context(what + ": pattern");
    DI_ASSIGN_OR_RETURN(Dfa pd, compile_leaf(ast, *root, limits, what + ": pattern"));
    DI_ASSIGN_OR_RETURN(body, dfa_intersect(body, pd, limits, what));
  }
  for (const std::string& f : spec.formats) {
    auto re = format_regex(f);
    if (!re.is_ok()) return re.status().with_context(what);
    Ast ast;
    DI_ASSIGN_OR_RETURN(NodeId root, parse_regex(*re, ast, {}, mapper));
    DI_ASSIGN_OR_RETURN(Dfa fd, compile_leaf(ast, root, limits, what + ": format " + f));
    DI_ASSIGN_OR_RETURN(body, dfa_intersect(body, fd, limits, what));
    if (f == "hostname" && (spec.max_length < 0 || spec.max_length > 253)) {
      // RFC 1123: at most 253 characters in all (the labels' regex bounds each label only).
      DI_ASSIGN_OR_RETURN(body, dfa_intersect(body, counted_chars(0, 253, spec.raw), limits, what));
    }
  }
  auto out = std::make_shared<const Dfa>(spec.raw || body.empty() ? std::move(body) : wrap_in_quotes(body));
  string_cache().put(key, out);
  return out;
}

}  // namespace deepinfer::grammar
