// Merging a pre-token's characters by rank. A heap holds every adjacent
// pair that has a merge, lowest rank first and, among equal ranks, the
// leftmost; a popped pair whose symbols have changed since it was pushed is
// stale and skipped. Each merge pushes at most two new pairs, so a word of
// n characters costs O(n log n), not the O(n^2) of rescanning it for the
// best pair after every merge; the order of merges (and so the ids) is
// the same as HF's.
#include <cstdio>
#include <queue>

#include "hub/bpe_tokenizer.hpp"
#include "hub/text_unicode.hpp"

namespace tandem::host::hub {
namespace {

// Bounds the cache of pre-token ids: a corpus of unbounded vocabulary (ids,
// hashes) would otherwise grow it without end.
constexpr size_t kCacheEntries = 1 << 18;

struct Candidate {
  int32_t rank, position, merged;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : position > o.position; }
};

std::string code_point_name(std::string_view c) {
  char b[16];
  std::snprintf(b, sizeof b, "U+%04X", unsigned(utf8_decode(c, 0)));
  return b;
}

}  // namespace

// The ids of `word`'s characters, before any merge: a character the
// vocabulary lacks becomes its bytes' <0xXX> tokens (byte_fallback) or the
// unk token (fused with an unknown neighbour under fuse_unk).
Result<void> BpeModel::spell(std::string_view word, std::vector<int32_t>& symbols) const {
  bool pending_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(utf8_length(static_cast<unsigned char>(word[i])), word.size() - i);
    const std::string c(word.substr(i, n));
    i += n;
    if (auto it = vocab.find(c); it != vocab.end()) {
      pending_unk = false;
      symbols.push_back(it->second);
      continue;
    }
    if (byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : c) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        if (auto it = vocab.find(name); it != vocab.end()) bytes.push_back(it->second);
      }
      if (bytes.size() == c.size()) {
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (!unk)
      return make_error(file + ": model.vocab has no token for the character " + code_point_name(c) +
                            " and there is no unk_token to stand for it (a byte-level vocabulary must "
                            "hold all 256 characters of the byte alphabet)",
                        TDM_INVALID_ARGUMENT);
    if (!(pending_unk && fuse_unk)) symbols.push_back(*unk);
    pending_unk = true;
  }
  return {};
}

void BpeModel::merge(std::vector<int32_t>& symbols) const {
  const int32_t n = int32_t(symbols.size());
  std::vector<int32_t> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  std::vector<bool> alive(static_cast<size_t>(n), true);
  for (int32_t i = 0; i < n; ++i) {
    prev[size_t(i)] = i - 1;
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t left) {
    const int32_t right = next[size_t(left)];
    if (right < 0) return;
    auto it = merges.find(pair(symbols[size_t(left)], symbols[size_t(right)]));
    if (it != merges.end()) heap.push({it->second.rank, left, it->second.merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const int32_t left = top.position, right = next[size_t(left)];
    if (!alive[size_t(left)] || right < 0) continue;
    auto it = merges.find(pair(symbols[size_t(left)], symbols[size_t(right)]));
    if (it == merges.end() || it->second.merged != top.merged) continue;  // stale
    symbols[size_t(left)] = top.merged;
    alive[size_t(right)] = false;
    next[size_t(left)] = next[size_t(right)];
    if (next[size_t(left)] >= 0) prev[size_t(next[size_t(left)])] = left;
    if (prev[size_t(left)] >= 0) push(prev[size_t(left)]);
    push(left);
  }
  size_t kept = 0;
  for (int32_t i = 0; i < n; ++i)
    if (alive[size_t(i)]) symbols[kept++] = symbols[size_t(i)];
  symbols.resize(kept);
}

Result<void> BpeModel::tokenize(std::string_view view, std::vector<int32_t>& out) const {
  const std::string word(view);
  if (ignore_merges)
    if (auto it = vocab.find(word); it != vocab.end()) {
      out.push_back(it->second);
      return {};
    }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return {};
    }
  }
  std::vector<int32_t> symbols;
  if (auto r = spell(word, symbols); !r) return r.error();
  merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kCacheEntries) cache_.clear();
  cache_.emplace(word, std::move(symbols));
  return {};
}

}  // namespace tandem::host::hub
