// The engine's seam to the grammar engine: compile a Request's StructuredOutput once at submit
// (on the caller's thread; the compiled form is immutable and shared by the request's n
// sequences), then one matcher per sequence on the engine thread that fills the sampler's token
// bitmask and advances over each sampled token. Nothing else in the engine knows grammar types.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "deepinfer/engine.h"

namespace deepinfer::engine {

class CompiledStructuredOutput {
 public:
  virtual ~CompiledStructuredOutput() = default;
};

// Per-sequence state. Not thread-safe.
class StructuredOutputMatcher {
 public:
  virtual ~StructuredOutputMatcher() = default;
  // Bit i of word i/32 set = token i may come next (bitmask_words(n_vocab) words).
  virtual Status fill_bitmask(std::span<uint32_t> words) = 0;
  // Advances over the sampled token; false if the grammar does not allow it.
  virtual bool accept(int32_t token) = 0;
  // The grammar reached its end (only EOS may follow).
  virtual bool is_terminated() const = 0;
  // Undoes the last n accepted tokens (speculative decoding checks drafts against the grammar
  // and takes them back); errors if fewer were accepted.
  virtual Status rollback(int32_t n) = 0;
};

// Thread-safe: compile() may be called from any submitting thread.
class StructuredOutputCompiler {
 public:
  // Errors when the grammar engine cannot index this tokenizer / vocabulary size.
  static Result<std::unique_ptr<StructuredOutputCompiler>> create(std::shared_ptr<const Tokenizer> tokenizer,
                                                                  int32_t n_vocab);
  virtual ~StructuredOutputCompiler() = default;
  // Errors are INVALID_ARGUMENT naming "structured_output" and the construct at fault.
  virtual Result<std::shared_ptr<const CompiledStructuredOutput>> compile(const StructuredOutput& spec) const = 0;
  virtual std::unique_ptr<StructuredOutputMatcher> make_matcher(
      const std::shared_ptr<const CompiledStructuredOutput>& compiled) const = 0;
};

}  // namespace deepinfer::engine
