#include "loader/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace deepinfer::loader {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeaderBytes = 256ull << 20;

// Multiplies without overflow; false if the product exceeds 2^62.
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > (uint64_t{1} << 62) / a) return false;
  *out = a * b;
  return true;
}

Status parse_entry(const std::string& label, const std::string& name, const json& v,
                   uint64_t data_size, TensorInfo* out) {
  auto bad = [&](const std::string& why) {
    return data_loss("{}: tensor '{}': {}", label, name, why);
  };
  if (!v.is_object()) return bad("entry is not a JSON object");
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return bad("missing string 'dtype'");
  if (sh == v.end() || !sh->is_array()) return bad("missing array 'shape'");
  if (off == v.end() || !off->is_array() || off->size() != 2) {
    return bad("'data_offsets' must be [begin, end]");
  }
  const auto dtype = tensor::parse_dtype(dt->get<std::string>());
  if (!dtype) return bad("unknown dtype '" + dt->get<std::string>() + "'");
  out->name = name;
  out->dtype = *dtype;
  uint64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
    const uint64_t x = d.get<uint64_t>();
    if (!checked_mul(numel, x, &numel)) return bad("shape overflows");
    out->shape.push_back(static_cast<int64_t>(x));
  }
  for (const json& o : *off) {
    if (!o.is_number_unsigned()) return bad("data_offsets must be non-negative integers");
  }
  out->begin = (*off)[0].get<uint64_t>();
  out->end = (*off)[1].get<uint64_t>();
  if (out->begin > out->end) return bad("data_offsets begin > end");
  if (out->end > data_size) {
    return bad(fmt::format("data_offsets end {} beyond the data section of {} bytes (truncated file?)",
                           out->end, data_size));
  }
  uint64_t expected = 0;
  if (!checked_mul(numel, tensor::dtype_size(*dtype), &expected)) return bad("byte size overflows");
  if (out->end - out->begin != expected) {
    return bad(fmt::format("holds {} bytes but dtype {} x shape needs {}", out->end - out->begin,
                           dt->get<std::string>(), expected));
  }
  return Status::ok();
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, size_t size,
                                                   uint64_t file_size, const std::string& label) {
  if (size < 8 || file_size < 8) return data_loss("{}: file shorter than the 8-byte header length", label);
  uint64_t n = 0;
  std::memcpy(&n, data, 8);  // little-endian u64 (all supported hosts are little-endian)
  if (n > kMaxHeaderBytes) return data_loss("{}: header length {} is implausibly large", label, n);
  if (n > file_size - 8 || n > size - 8) {
    return data_loss("{}: header length {} exceeds the file size {} (truncated file?)", label, n,
                     file_size);
  }
  // Duplicate top-level keys would silently overwrite each other in a JSON object; detect them.
  std::set<std::string> seen;
  std::string duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) {
      const std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  const char* begin = reinterpret_cast<const char*>(data + 8);
  json header = json::parse(begin, begin + n, callback, /*allow_exceptions=*/false);
  if (header.is_discarded()) return data_loss("{}: header is not valid JSON", label);
  if (!header.is_object()) return data_loss("{}: header is not a JSON object", label);
  if (!duplicate.empty()) return data_loss("{}: tensor '{}' appears twice in the header", label, duplicate);

  SafetensorsHeader out;
  out.data_start = 8 + n;
  const uint64_t data_size = file_size - out.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return data_loss("{}: __metadata__ is not an object", label);
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return data_loss("{}: __metadata__ value '{}' is not a string", label, m.key());
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorInfo info;
    DI_RETURN_IF_ERROR(parse_entry(label, it.key(), *it, data_size, &info));
    out.tensors.push_back(std::move(info));
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < out.tensors.size(); ++i) {
    const TensorInfo& prev = out.tensors[i - 1];
    const TensorInfo& cur = out.tensors[i];
    if (cur.begin < prev.end && cur.nbytes() > 0 && prev.nbytes() > 0) {
      return data_loss("{}: tensors '{}' and '{}' overlap ([{}, {}) and [{}, {}))", label, prev.name,
                       cur.name, prev.begin, prev.end, cur.begin, cur.end);
    }
  }
  return out;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  DI_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  DI_ASSIGN_OR_RETURN(f.header_,
                      parse_safetensors_header(f.file_.data(), f.file_.size(), f.file_.size(), path));
  for (size_t i = 0; i < f.header_.tensors.size(); ++i) f.by_name_[f.header_.tensors[i].name] = i;
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

uint64_t SafetensorsWriter::Entry::nbytes() const {
  uint64_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<uint64_t>(d);
  return numel * tensor::dtype_size(dtype);
}

void SafetensorsWriter::add(std::string name, tensor::DType dtype, std::vector<int64_t> shape,
                            std::string bytes) {
  add_lazy(std::move(name), dtype, std::move(shape),
           [b = std::make_shared<std::string>(std::move(bytes))] { return *b; });
}

void SafetensorsWriter::add_lazy(std::string name, tensor::DType dtype, std::vector<int64_t> shape,
                                 Producer produce) {
  entries_.push_back({std::move(name), dtype, std::move(shape), std::move(produce)});
}

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::sorted() const {
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
  return order;
}

uint64_t SafetensorsWriter::data_bytes() const {
  uint64_t n = 0;
  for (const auto& e : entries_) n += e.nbytes();
  return n;
}

std::vector<std::string> SafetensorsWriter::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

std::string SafetensorsWriter::header_text() const {
  // Tensors are laid out in name order. nlohmann's object is a sorted map, so the header's key
  // order is the same, with "__metadata__" first.
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const Entry* e : sorted()) {
    header[e->name] = {{"dtype", std::string(tensor::dtype_name(e->dtype))},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + e->nbytes()}}};
    offset += e->nbytes();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');
  return text;
}

Status SafetensorsWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return not_found("cannot create {}: {}", tmp, std::strerror(errno));
  const std::string text = header_text();
  const uint64_t n = text.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(text.data(), 1, n, f) == n;
  for (const Entry* e : sorted()) {
    if (!ok) break;
    const std::string bytes = e->produce();
    if (bytes.size() != e->nbytes()) {
      std::fclose(f);
      std::remove(tmp.c_str());
      return invalid_argument("tensor '{}': produced {} bytes but dtype {} x shape needs {}", e->name,
                              bytes.size(), tensor::dtype_name(e->dtype), e->nbytes());
    }
    ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return data_loss("error writing {}", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return data_loss("cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace deepinfer::loader
