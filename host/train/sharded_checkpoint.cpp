#include "train/sharded_checkpoint.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "exec/tensor_text.hpp"
#include "ops/shapes.hpp"
#include "train/checkpointing.hpp"

namespace tandem::host::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kShards = "tandem.shards";
constexpr const char* kShard = "tandem.shard";
constexpr const char* kWhole = "tandem.whole.";
constexpr const char* kStages = "tandem.shards_hold_stages";

std::string step_name(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%09ld.sharded", static_cast<long>(step));
  return name;
}

std::string rank_file(int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d.safetensors", rank);
  return name;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out;
  for (int64_t d : dims) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

Result<std::vector<int64_t>> dims_of(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long long d = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || d < 0)
      return make_error(what + " = \"" + text + "\" is not a shape", TDM_INVALID_ARGUMENT);
    dims.push_back(d);
  }
  return dims;
}

Result<int> whole_number(const checkpoint::Checkpoint& cp, const char* key, const std::string& file) {
  auto it = cp.metadata.find(key);
  if (it == cp.metadata.end())
    return make_error(file + ": no " + key + " in its metadata: not a shard of a Tandem checkpoint",
                      TDM_INVALID_ARGUMENT);
  char* end = nullptr;
  const long value = std::strtol(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || value < 0 || value > 1 << 20)
    return make_error(file + ": " + key + " = \"" + it->second + "\" is not a rank count",
                      TDM_INVALID_ARGUMENT);
  return static_cast<int>(value);
}

// Shard `rank` of a checkpoint of `world` shards in `dir`, checked to be that.
Result<checkpoint::Checkpoint> read_shard_file(const std::string& dir, int rank, int world) {
  const std::string file = (fs::path(dir) / rank_file(rank)).string();
  if (!fs::exists(file))
    return make_error(
        dir + ": " + rank_file(rank) + " is missing: the checkpoint has " + std::to_string(world) +
            " shards and is incomplete (restore the file, or resume from an earlier checkpoint)",
        TDM_NOT_FOUND);
  auto shard = checkpoint::read_safetensors(file);
  if (!shard) return shard.error();
  auto index = whole_number(*shard, kShard, file);
  if (!index) return index.error();
  auto of = whole_number(*shard, kShards, file);
  if (!of) return of.error();
  if (*index != rank || *of != world)
    return make_error(file + ": written as shard " + std::to_string(*index) + " of " + std::to_string(*of) +
                          ", not " + std::to_string(rank) + " of " + std::to_string(world),
                      TDM_INVALID_ARGUMENT);
  return shard;
}

// What only the files of a sharded checkpoint need to say.
void drop_shard_metadata(checkpoint::Checkpoint& cp) {
  for (auto it = cp.metadata.begin(); it != cp.metadata.end();)
    it = it->first.rfind("tandem.shard", 0) == 0 || it->first.rfind(kWhole, 0) == 0 ? cp.metadata.erase(it)
                                                                                    : std::next(it);
}

}  // namespace

bool is_sharded_checkpoint(const std::string& path) {
  return fs::path(path).extension() == ".sharded" && fs::is_directory(path);
}

Result<void> write_checkpoint_shard(const std::string& run_dir, int64_t step, int rank, int world,
                                    checkpoint::Checkpoint cp,
                                    const std::map<std::string, std::vector<int64_t>>& whole) {
  const fs::path partial = fs::path(checkpoint_dir(run_dir)) / (step_name(step) + ".partial");
  std::error_code ec;
  fs::create_directories(partial, ec);
  if (ec)
    return make_error(partial.string() + ": cannot create (" + ec.message() + ")", TDM_INVALID_ARGUMENT);
  cp.metadata[kShard] = std::to_string(rank);
  cp.metadata[kShards] = std::to_string(world);
  for (const auto& [name, dims] : whole) cp.metadata[kWhole + name] = dims_text(dims);
  return checkpoint::write_safetensors((partial / rank_file(rank)).string(), cp);
}

Result<void> write_stage_checkpoint_shard(const std::string& run_dir, int64_t step, int stage, int stages,
                                          checkpoint::Checkpoint cp) {
  cp.metadata[kStages] = "true";
  return write_checkpoint_shard(run_dir, step, stage, stages, std::move(cp), {});
}

Result<std::string> publish_checkpoint_shards(const std::string& run_dir, int64_t step, int64_t keep) {
  const fs::path final_dir = fs::path(checkpoint_dir(run_dir)) / step_name(step);
  const fs::path partial = final_dir.string() + ".partial";
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // the same step written again (a resumed run)
  fs::rename(partial, final_dir, ec);
  if (ec)
    return make_error(
        partial.string() + ": cannot rename to " + final_dir.string() + " (" + ec.message() + ")",
        TDM_INVALID_ARGUMENT);
  remove_old_checkpoints(run_dir, keep);
  return final_dir.string();
}

Result<checkpoint::Checkpoint> read_checkpoint_shard(
    const std::string& dir, int rank, int world, const std::map<std::string, std::vector<int64_t>>& sharded) {
  const std::string first = (fs::path(dir) / rank_file(0)).string();
  auto cp = checkpoint::read_safetensors(first);
  if (!cp) return cp.error();
  auto shards = whole_number(*cp, kShards, first);
  if (!shards) return shards.error();
  // A pipeline's files hold stages, not shards of the tensors a ZeRO run splits.
  bool same = *shards == world && cp->metadata.count(kStages) == 0;
  for (const auto& [key, value] : cp->metadata)
    if (key.rfind(kWhole, 0) == 0) same = same && sharded.count(key.substr(std::string(kWhole).size())) > 0;
  if (!same) return read_sharded_checkpoint(dir);
  if (rank != 0) {
    auto own = read_shard_file(dir, rank, world);
    if (!own) return own.error();
    const std::string file = (fs::path(dir) / rank_file(rank)).string();
    for (checkpoint::TensorRecord& t : cp->tensors) {
      if (cp->metadata.count(kWhole + t.name) == 0) continue;
      const checkpoint::TensorRecord* mine = own->find(t.name);
      if (mine == nullptr || mine->dtype != t.dtype || mine->data.size() != t.data.size())
        return make_error(
            file + " lacks its shard of '" + t.name + "' (or holds one of another size or dtype)",
            TDM_INVALID_ARGUMENT);
      t.data = mine->data;
    }
  }
  drop_shard_metadata(*cp);
  return cp;
}

Result<checkpoint::Checkpoint> read_sharded_checkpoint(const std::string& dir) {
  const std::string first = (fs::path(dir) / rank_file(0)).string();
  auto cp = checkpoint::read_safetensors(first);
  if (!cp) return cp.error();
  auto world = whole_number(*cp, kShards, first);
  if (!world) return world.error();
  std::vector<checkpoint::Checkpoint> ranks;
  for (int r = 1; r < *world; ++r) {
    auto shard = read_shard_file(dir, r, *world);
    if (!shard) return shard.error();
    ranks.push_back(std::move(*shard));
  }
  for (checkpoint::TensorRecord& t : cp->tensors) {
    auto it = cp->metadata.find(kWhole + t.name);
    if (it == cp->metadata.end()) continue;
    auto whole = dims_of(it->second, first + ": " + kWhole + t.name);
    if (!whole) return whole.error();
    const size_t shard_bytes = t.data.size();
    for (size_t r = 0; r < ranks.size(); ++r) {
      const checkpoint::TensorRecord* part = ranks[r].find(t.name);
      if (part == nullptr || part->dtype != t.dtype || part->data.size() != shard_bytes)
        return make_error(dir + ": " + rank_file(static_cast<int>(r) + 1) + " lacks its shard of '" + t.name +
                              "' (or holds one of another size or dtype)",
                          TDM_INVALID_ARGUMENT);
      t.data.insert(t.data.end(), part->data.begin(), part->data.end());
    }
    const size_t bytes = static_cast<size_t>(ops::numel(*whole)) * exec::dtype_size(t.dtype);
    if (bytes > t.data.size())
      return make_error(dir + ": the shards of '" + t.name + "' hold fewer elements than its whole shape " +
                            ops::dims_str(*whole),
                        TDM_INVALID_ARGUMENT);
    t.data.resize(bytes);
    t.shape = *whole;
  }
  // The other files' whole tensors (a pipeline stage's).
  for (checkpoint::Checkpoint& other : ranks)
    for (checkpoint::TensorRecord& t : other.tensors)
      if (cp->metadata.count(kWhole + t.name) == 0 && cp->find(t.name) == nullptr)
        cp->tensors.push_back(std::move(t));
  drop_shard_metadata(*cp);
  return cp;
}

}  // namespace tandem::host::train
