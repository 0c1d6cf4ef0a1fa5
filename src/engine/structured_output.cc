// StructuredOutputCompiler: placeholder until the grammar engine's public header lands; every
// structured_output request fails at submit with UNIMPLEMENTED naming the field.
#include "engine/structured_output.h"

#include "base/status.h"

namespace deepinfer::engine {

Result<std::unique_ptr<StructuredOutputCompiler>> StructuredOutputCompiler::create(std::shared_ptr<const Tokenizer>,
                                                                                  int32_t) {
  return unimplemented("structured_output: the grammar engine is not wired into this build");
}

}  // namespace deepinfer::engine
