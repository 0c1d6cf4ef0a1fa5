// File helpers with Status errors that name the path: whole-file read/write and a
// read-only memory mapping (how checkpoints are read: weights are views into the mapping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace deepinfer {

Result<std::string> read_file(const std::string& path);
// Writes to `path.tmp` then renames, so a crash never leaves a half-written file behind.
Status write_file_atomic(const std::string& path, std::string_view contents);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
Status make_directories(const std::string& path);

// An exclusive advisory lock (flock) on `path`, created if missing, held for the object's
// lifetime: one process at a time generates what several may ask for at once (the demo model,
// the tests' synthetic checkpoints). held() is false when the file could not be opened or locked.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A read-only mmap of a whole file. Movable, not copyable; unmaps on destruction.
class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace deepinfer
