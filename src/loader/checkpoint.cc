#include "loader/checkpoint.h"

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "base/log.h"

namespace deepinfer::loader {
namespace {

using json = nlohmann::json;

Status add_shard(Checkpoint* ckpt, const std::string& path,
                 std::vector<std::unique_ptr<SafetensorsFile>>* shards) {
  auto file = SafetensorsFile::open(path);
  if (!file.is_ok()) return file.status();
  shards->push_back(std::make_unique<SafetensorsFile>(std::move(file).value()));
  return Status::ok();
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  if (!is_directory(dir)) return not_found("checkpoint directory {} does not exist", dir);
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single_path = (fs::path(dir) / "model.safetensors").string();

  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  if (file_exists(index_path)) {
    DI_ASSIGN_OR_RETURN(std::string text, read_file(index_path));
    json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object()) return data_loss("{}: not a JSON object", index_path);
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) return data_loss("{}: missing object 'weight_map'", index_path);
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) return data_loss("{}: weight_map['{}'] is not a string", index_path, it.key());
      const std::string shard = it->get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..") {
        return data_loss("{}: weight_map['{}'] names a path outside the directory: {}", index_path,
                         it.key(), shard);
      }
      weight_map[it.key()] = shard;
    }
    std::set<std::string> shard_names;
    for (const auto& [name, shard] : weight_map) shard_names.insert(shard);
    std::map<std::string, const SafetensorsFile*> by_shard;
    for (const std::string& shard : shard_names) {
      DI_RETURN_IF_ERROR(add_shard(&ckpt, (fs::path(dir) / shard).string(), &ckpt.shards_));
      by_shard[shard] = ckpt.shards_.back().get();
    }
    uint64_t total = 0;
    for (const auto& [name, shard] : weight_map) {
      const SafetensorsFile* f = by_shard[shard];
      const TensorInfo* info = f->find(name);
      if (info == nullptr) {
        return data_loss("{}: index maps tensor '{}' to {}, which does not contain it", index_path, name, shard);
      }
      ckpt.tensors_[name] = TensorRef{info, f, f->data(*info)};
      total += info->nbytes();
    }
    for (const auto& f : ckpt.shards_) {
      for (const TensorInfo& info : f->tensors()) {
        auto it = weight_map.find(info.name);
        if (it == weight_map.end()) {
          return data_loss("{}: tensor '{}' is in {} but not in the index", index_path, info.name, f->path());
        }
      }
    }
    auto meta = index.find("metadata");
    if (meta != index.end() && meta->is_object() && meta->contains("total_size") &&
        (*meta)["total_size"].is_number_unsigned() && (*meta)["total_size"].get<uint64_t>() != total) {
      log_warn("{}: metadata.total_size {} differs from the tensors' {} bytes", index_path,
               (*meta)["total_size"].get<uint64_t>(), total);
    }
  } else if (file_exists(single_path)) {
    DI_RETURN_IF_ERROR(add_shard(&ckpt, single_path, &ckpt.shards_));
    const SafetensorsFile* f = ckpt.shards_.back().get();
    for (const TensorInfo& info : f->tensors()) ckpt.tensors_[info.name] = TensorRef{&info, f, f->data(info)};
  } else {
    return not_found("{}: neither model.safetensors.index.json nor model.safetensors exists", dir);
  }
  return ckpt;
}

std::optional<TensorRef> Checkpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, ref] : tensors_) out.push_back(name);
  return out;
}

}  // namespace deepinfer::loader
