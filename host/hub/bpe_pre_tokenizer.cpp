// Cutting text before BPE sees it: the added tokens first, then the
// pre-tokenizer's steps. Both follow HF's `tokenizers` rule by rule (how a
// Split keeps what its pattern matches, that an empty match still cuts,
// that an added token's lstrip stops at the previous token), because a
// different cut gives different ids even where every merge agrees.
#include "hub/bpe_tokenizer.hpp"
#include "hub/text_unicode.hpp"

namespace tandem::host::hub {
namespace {

struct Part {
  size_t begin, end;
  bool match;
};

// The parts of `text`, matches and what lies between them, folded as
// `behavior` says (HF's NormalizedString::split).
std::vector<Part> fold(const std::vector<Part>& parts, SplitBehavior behavior) {
  std::vector<Part> out;
  bool previous = false;
  switch (behavior) {
    case SplitBehavior::isolated:
      return parts;
    case SplitBehavior::removed:
      for (const Part& p : parts)
        if (!p.match) out.push_back(p);
      return out;
    case SplitBehavior::merged_with_previous:
      for (const Part& p : parts) {
        if (p.match && !previous && !out.empty())
          out.back().end = p.end;
        else
          out.push_back(p);
        previous = p.match;
      }
      return out;
    case SplitBehavior::merged_with_next:
      for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
        if (p->match && !previous && !out.empty())
          out.back().begin = p->begin;
        else
          out.push_back(*p);
        previous = p->match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::contiguous:
      for (const Part& p : parts) {
        if (p.match == previous && !out.empty())
          out.back().end = p.end;
        else
          out.push_back(p);
        previous = p.match;
      }
      return out;
  }
  return out;
}

Result<void> split(const TextRegex& regex, SplitBehavior behavior, const std::string& text,
                   std::vector<std::string>& out) {
  auto found = regex.find_all(text);
  if (!found) return found.error();
  std::vector<Part> parts;
  size_t previous = 0;
  for (auto [begin, end] : *found) {
    if (begin != previous) parts.push_back({previous, begin, false});
    parts.push_back({begin, end, true});
    previous = end;
  }
  if (previous != text.size()) parts.push_back({previous, text.size(), false});
  for (const Part& p : fold(parts, behavior))
    if (p.end > p.begin) out.push_back(text.substr(p.begin, p.end - p.begin));
  return {};
}

// A word character next to a single_word added token keeps it from matching.
bool is_word_character(std::string_view text, size_t at) {
  static const Result<TextRegex> word = TextRegex::compile("^\\w");
  const size_t n = std::min(utf8_length(static_cast<unsigned char>(text[at])), text.size() - at);
  if (!word) return false;
  auto found = word->find_all(text.substr(at, n));
  return found && !found->empty();
}

size_t previous_character(std::string_view text, size_t at) {
  do --at;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80);
  return at;
}

// The longest rule of kind `normalized` whose content starts at text[at].
const AddedTokenRule* longest_at(const std::vector<AddedTokenRule>& rules, bool normalized,
                                 std::string_view text, size_t at) {
  const AddedTokenRule* best = nullptr;
  for (const AddedTokenRule& r : rules)
    if (r.normalized == normalized && text.compare(at, r.token.content.size(), r.token.content) == 0 &&
        (best == nullptr || r.token.content.size() > best->token.content.size()))
      best = &r;
  return best;
}

}  // namespace

Result<void> pre_tokenize(const std::vector<PreTokenizerStep>& steps, std::string_view text,
                          std::vector<std::string>& out) {
  std::vector<std::string> pieces, next;
  if (!text.empty()) pieces.emplace_back(text);
  for (const PreTokenizerStep& step : steps) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::split) {
        if (auto r = split(*step.regex, step.behavior, piece, next); !r) return r.error();
        continue;
      }
      if (step.add_prefix_space && piece[0] != ' ') piece.insert(0, " ");
      const size_t first = next.size();
      if (step.regex) {
        if (auto r = split(*step.regex, SplitBehavior::isolated, piece, next); !r) return r.error();
      } else {
        next.push_back(std::move(piece));
      }
      for (size_t i = first; i < next.size(); ++i) next[i] = to_byte_chars(next[i]);
    }
    pieces.swap(next);
  }
  for (std::string& piece : pieces) out.push_back(std::move(piece));
  return {};
}

std::vector<TextPiece> split_added(const std::vector<AddedTokenRule>& rules, bool normalized,
                                   std::string_view text) {
  std::vector<bool> starts(256, false);  // first bytes of the rules' contents, to skip the rest fast
  bool any = false;
  for (const AddedTokenRule& r : rules)
    if (r.normalized == normalized && !r.token.content.empty())
      any = starts[static_cast<unsigned char>(r.token.content[0])] = true;
  std::vector<TextPiece> pieces;
  size_t done = 0;  // the end of the last token taken
  for (size_t at = 0; any && at < text.size();) {
    const AddedTokenRule* rule =
        starts[static_cast<unsigned char>(text[at])] ? longest_at(rules, normalized, text, at) : nullptr;
    if (rule == nullptr) {
      ++at;
      continue;
    }
    size_t begin = at, end = at + rule->token.content.size();
    at = end;
    if (rule->single_word && ((begin > 0 && is_word_character(text, previous_character(text, begin))) ||
                              (end < text.size() && is_word_character(text, end))))
      continue;
    if (rule->lstrip)
      while (begin > done && is_white_space(utf8_decode(text, previous_character(text, begin))))
        begin = previous_character(text, begin);
    if (rule->rstrip)
      while (end < text.size() && is_white_space(utf8_decode(text, end)))
        end += utf8_length(static_cast<unsigned char>(text[end]));
    if (begin > done) pieces.push_back({done, begin, -1});
    pieces.push_back({begin, end, rule->token.id});
    done = at = end;
  }
  if (done < text.size()) pieces.push_back({done, text.size(), -1});
  return pieces;
}

}  // namespace tandem::host::hub
