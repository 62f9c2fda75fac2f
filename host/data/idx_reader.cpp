#include "data/idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "util/host_memory.hpp"

namespace tandem::host::data {
namespace {

// A gzip-or-plain input that remembers how far it got, for messages.
class CountingReader {
 public:
  explicit CountingReader(const std::string& path)
      : path_(path), file_(gzopen(path.c_str(), "rb"), &gzclose) {}
  bool is_open() const { return file_ != nullptr; }

  // Reads exactly `n` bytes or explains why not.
  Result<void> read(void* dst, size_t n, const char* what) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(file_.get(), out + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* why = gzerror(file_.get(), &code);
        return make_error(path_ + ": corrupted data at uncompressed offset " +
                              std::to_string(offset_ + done) + " while reading " + what + " (" + why +
                              "); the file is damaged: reinstall or re-download it",
                          TDM_INVALID_ARGUMENT);
      }
      if (got == 0) {
        return make_error(path_ + ": truncated at offset " + std::to_string(offset_ + done) +
                              " while reading " + what + " (" + std::to_string(n) +
                              " bytes expected from offset " + std::to_string(offset_) +
                              "); the file is incomplete",
                          TDM_INVALID_ARGUMENT);
      }
      done += static_cast<size_t>(got);
    }
    offset_ += n;
    return {};
  }
  uint64_t offset() const { return offset_; }

 private:
  std::string path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
  uint64_t offset_ = 0;
};

constexpr uint64_t kFirstReadBytes = 64 << 10;

size_t element_size(uint8_t type) {
  switch (type) {
    case 0x08:
    case 0x09:
      return 1;
    case 0x0B:
      return 2;
    case 0x0C:
    case 0x0D:
      return 4;
    case 0x0E:
      return 8;
    default:
      return 0;
  }
}

// IDX is big-endian; this machine may not be.
template <class T>
T from_big_endian(const unsigned char* p) {
  std::array<unsigned char, sizeof(T)> b;
  std::memcpy(b.data(), p, sizeof(T));
  if constexpr (std::endian::native == std::endian::little) std::reverse(b.begin(), b.end());
  T v;
  std::memcpy(&v, b.data(), sizeof(T));
  return v;
}

double decode(uint8_t type, const unsigned char* p) {
  switch (type) {
    case 0x08:
      return *p;
    case 0x09:
      return static_cast<int8_t>(*p);
    case 0x0B:
      return from_big_endian<int16_t>(p);
    case 0x0C:
      return from_big_endian<int32_t>(p);
    case 0x0D:
      return from_big_endian<float>(p);
    default:
      return from_big_endian<double>(p);
  }
}

// The size of `path` when it is not gzip-compressed (IDX files may be either).
std::optional<uint64_t> plain_file_size(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  unsigned char magic[2] = {};
  if (!file.read(reinterpret_cast<char*>(magic), 2) || (magic[0] == 0x1f && magic[1] == 0x8b))
    return std::nullopt;
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;
  return size;
}

}  // namespace

size_t IdxArray::count() const noexcept {
  const size_t size = element_size(type);
  return size == 0 ? 0 : data.size() / size;
}

double IdxArray::value(size_t i) const noexcept {
  return decode(type, data.data() + i * element_size(type));
}

Result<IdxArray> read_idx(const std::string& path) {
  if (std::filesystem::is_directory(path))
    return make_error(path +
                          " is a directory, not an IDX file: name the file itself ([data] train_images, "
                          "train_labels, test_images, test_labels)",
                      TDM_INVALID_ARGUMENT);
  CountingReader in(path);
  if (!in.is_open()) return make_error(path + ": cannot open (" + std::strerror(errno) + ")", TDM_NOT_FOUND);
  unsigned char header[4];
  if (auto r = in.read(header, 4, "the IDX header"); !r) return r.error();
  const size_t esize = element_size(header[2]);
  if (header[0] != 0 || header[1] != 0 || esize == 0 || header[3] == 0) {
    return make_error(path + ": not an IDX file (bad magic bytes at offset 0: expected 00 00 <type> <rank>)",
                      TDM_INVALID_ARGUMENT);
  }
  IdxArray array;
  array.type = header[2];
  uint64_t count = 1;
  for (int i = 0; i < header[3]; ++i) {
    unsigned char d[4];
    if (auto r = in.read(d, 4, "a dimension"); !r) return r.error();
    const uint32_t dim = from_big_endian<uint32_t>(d);
    array.dims.push_back(dim);
    // Saturates: a header whose product overflows claims more than any file holds.
    if (__builtin_mul_overflow(count, uint64_t(dim), &count)) count = UINT64_MAX;
  }
  // A plain file holds exactly its header and the data: a header that
  // claims more is damage, whatever the machine's memory.
  const double end = double(in.offset()) + double(count) * double(esize);
  if (auto size = plain_file_size(path); size && double(*size) < end) {
    std::ostringstream claimed;
    claimed << std::setprecision(20) << end;
    return make_error(path + ": truncated at offset " + std::to_string(*size) + ": its header says " +
                          std::to_string(count) + " elements of " + std::to_string(esize) +
                          (esize == 1 ? " byte" : " bytes") + ", which end at offset " + claimed.str() +
                          "; the file is cut short or damaged: re-download it",
                      TDM_INVALID_ARGUMENT);
  }
  // The elements as stored, and a u8 image's or a label's copy as a data
  // set keeps it: what loading holds at its peak (wider elements become f32).
  const double bytes = double(count) * double(esize + (esize == 1 ? 1 : sizeof(float)));
  if (auto r = check_host_memory(bytes >= 1.8e19 ? UINT64_MAX : uint64_t(bytes),
                                 path + " (its header says " + std::to_string(count) + " elements)",
                                 "the header is damaged or the file is not for this machine: re-download it");
      !r)
    return r.error();
  // The data grows as it is read, each read as large as all before it: a
  // gzip file whose header promises more than it holds (the size check
  // above sees only plain files) fails at its end having allocated about
  // what was there, not what the header claims.
  uint64_t total = 0;  // a saturated count (above) would wrap here
  if (__builtin_mul_overflow(count, esize, &total))
    return make_error(path + ": its header says " + std::to_string(count) +
                          " elements, more than any file holds; the header is damaged: re-download the file",
                      TDM_INVALID_ARGUMENT);
  std::vector<unsigned char>& raw = array.data;
  for (uint64_t done = 0; done < total;) {
    const uint64_t n = std::min(total - done, std::max(done, kFirstReadBytes));
    raw.resize(done + n);
    if (auto r = in.read(raw.data() + done, n, "the data"); !r) return r.error();
    done += n;
  }
  return array;
}

Result<Dataset> load_idx_images(const std::string& images_path, const std::string& labels_path) {
  auto images = read_idx(images_path);
  if (!images) return images.error();
  auto labels = read_idx(labels_path);
  if (!labels) return labels.error();
  if (images->dims.size() != 3)
    return make_error(images_path + ": expected images of shape [N, H, W], found rank " +
                          std::to_string(images->dims.size()),
                      TDM_INVALID_ARGUMENT);
  if (images->dims[0] == 0)
    return make_error(images_path + ": holds no samples (its header says 0 images)", TDM_INVALID_ARGUMENT);
  if (labels->dims.size() != 1 || labels->dims[0] != images->dims[0])
    return make_error(
        labels_path + ": expected " + std::to_string(images->dims[0]) + " labels to match " + images_path,
        TDM_INVALID_ARGUMENT);
  Dataset set;
  set.source = images_path;
  set.labels_source = labels_path;
  set.sample_shape = {1, images->dims[1], images->dims[2]};
  if (images->type == 0x08) {  // u8 pixels stay bytes; the loader widens them per batch
    set.pixels = std::move(images->data);
    set.pixel_value = scaled_bytes(255.0);
  } else {
    set.features.resize(images->count());
    for (size_t i = 0; i < set.features.size(); ++i)
      set.features[i] = static_cast<float>(images->value(i) / 255.0);
  }
  set.labels.resize(labels->count());
  int32_t max_label = -1;
  for (size_t i = 0; i < set.labels.size(); ++i) {
    const double v = labels->value(i);
    if (v < 0 || v > kMaxLabel || v != static_cast<int32_t>(v))
      return make_error(labels_path + ": label " + std::to_string(v) + " of sample " + std::to_string(i) +
                            " is not a class index",
                        TDM_INVALID_ARGUMENT);
    set.labels[i] = static_cast<int32_t>(v);
    max_label = std::max(max_label, set.labels[i]);
  }
  set.num_classes = max_label + 1;
  return set;
}

}  // namespace tandem::host::data
