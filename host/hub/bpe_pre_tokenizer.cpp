// Cutting text before BPE sees it: the added tokens first, then the
// pre-tokenizer's steps. Both follow HF's `tokenizers` rule by rule (how a
// Split keeps what its pattern matches, that an empty match still cuts,
// that an added token's lstrip stops at the previous token), because a
// different cut gives different ids even where every merge agrees.
#include <functional>
#include <optional>

#include "hub/bpe_tokenizer.hpp"
#include "hub/text_unicode.hpp"

namespace tandem::host::hub {
namespace {

struct Part {
  size_t begin, end;
  bool match;
};

// The parts of a split, matches and what lies between them, folded as a
// behavior says (HF's NormalizedString::split) and passed on as soon as no
// later part can join them, so that a text of any size streams through.
class Fold {
 public:
  Fold(SplitBehavior behavior, std::function<void(const Part&)> emit)
      : behavior_(behavior), emit_(std::move(emit)) {}

  void add(const Part& p) {
    switch (behavior_) {
      case SplitBehavior::isolated:
        emit_(p);
        break;
      case SplitBehavior::removed:
        if (!p.match) emit_(p);
        break;
      case SplitBehavior::merged_with_previous:  // a match joins the text before it
        if (p.match && !previous_ && pending_) {
          pending_->end = p.end;
          flush();
        } else {
          flush();
          if (p.match) emit_(p);
          if (!p.match) pending_ = p;
        }
        break;
      case SplitBehavior::merged_with_next:  // a match joins the text after it
        if (pending_ && !p.match) {
          emit_({pending_->begin, p.end, false});
          pending_.reset();
        } else {
          flush();
          if (p.match) pending_ = p;
          if (!p.match) emit_(p);
        }
        break;
      case SplitBehavior::contiguous:  // runs of matches, runs of the rest
        if (pending_ && p.match == previous_) {
          pending_->end = p.end;
        } else {
          flush();
          pending_ = p;
        }
        break;
    }
    previous_ = p.match;
  }
  void flush() {
    if (pending_) emit_(*pending_);
    pending_.reset();
  }

 private:
  SplitBehavior behavior_;
  std::function<void(const Part&)> emit_;
  std::optional<Part> pending_;
  bool previous_ = false;
};

using PieceSink = std::function<Result<void>(std::string_view)>;

Result<void> split(const TextRegex& regex, SplitBehavior behavior, std::string_view text,
                   const PieceSink& emit) {
  Result<void> status;
  Fold fold(behavior, [&](const Part& p) {
    if (status && p.end > p.begin) status = emit(text.substr(p.begin, p.end - p.begin));
  });
  size_t previous = 0;
  auto found = regex.for_each_match(text, [&](size_t begin, size_t end) {
    if (begin != previous) fold.add({previous, begin, false});
    fold.add({begin, end, true});
    previous = end;
  });
  if (!found) return found.error();
  if (previous != text.size()) fold.add({previous, text.size(), false});
  fold.flush();
  return status;
}

// Steps `i` onwards on one piece, depth first: only the pieces of one
// piece are alive at a time.
Result<void> run_steps(const std::vector<PreTokenizerStep>& steps, size_t i, std::string_view piece,
                       const WordSink& emit) {
  if (piece.empty()) return {};
  if (i == steps.size()) return emit(piece);
  const PreTokenizerStep& step = steps[i];
  const auto next = [&](std::string_view sub) { return run_steps(steps, i + 1, sub, emit); };
  if (step.kind == PreTokenizerStep::Kind::split) return split(*step.regex, step.behavior, piece, next);
  std::string prefixed;
  if (step.add_prefix_space && piece[0] != ' ') piece = prefixed = " " + std::string(piece);
  const auto spelled = [&](std::string_view sub) { return next(to_byte_chars(sub)); };
  if (step.regex) return split(*step.regex, SplitBehavior::isolated, piece, spelled);
  return spelled(piece);
}

// A word character next to a single_word added token keeps it from matching.
bool is_word_character(std::string_view text, size_t at) {
  static const Result<TextRegex> word = TextRegex::compile("^\\w");
  const size_t n = std::min(utf8_length(static_cast<unsigned char>(text[at])), text.size() - at);
  bool found = false;
  if (word) (void)word->for_each_match(text.substr(at, n), [&](size_t, size_t) { found = true; });
  return found;
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
                          const WordSink& emit) {
  return run_steps(steps, 0, text, emit);
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
