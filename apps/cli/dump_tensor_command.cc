// `deepinfer dump-tensor`: writes a checkpoint tensor, dequantised to F32, as a .npy file
// (used to compare our byte-format decoding with independent readers, e.g. transformers).
#include <cstdio>
#include <fstream>

#include "command.h"
#include "deepinfer/model.h"

namespace deepinfer::cli {
namespace {

struct DumpArgs {
  std::string model, tensor, out;
  int64_t rows = 0;
};

// NumPy .npy v1.0: magic, header length, a Python-dict header padded to 64 bytes, then data.
bool write_npy(const std::string& path, const DequantizedTensor& t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? "," : (i + 1 < t.shape.size() ? ", " : ""));
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * 4));
  return static_cast<bool>(out);
}

void setup(CLI::App* app) {
  auto args = std::make_shared<DumpArgs>();
  app->add_option("--model", args->model, "checkpoint directory")->required();
  app->add_option("--tensor", args->tensor, "official parameter name, e.g. layers.0.attn.wq_a.weight")->required();
  app->add_option("--rows", args->rows, "only the first N rows (0: all)");
  app->add_option("--out", args->out, "output .npy path")->required();
  app->callback([args] {
    auto t = read_dequantized(args->model, args->tensor, args->rows);
    if (!t.is_ok()) fail("dump-tensor", t.status().message(), 2);
    if (!write_npy(args->out, *t)) fail("dump-tensor", "cannot write " + args->out, 1);
  });
}

DI_CLI_COMMAND("dump-tensor", "Write a checkpoint tensor dequantised to F32 as .npy", setup);

}  // namespace
}  // namespace deepinfer::cli
