#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/pre_tokenizer.h"
#include "base/utf8.h"

namespace tarmac::tok {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

// A symbol of the merge loop: a span of the working string, linked to its neighbours.
struct Symbol {
  int32_t id;     // BPE: token id; SPM: unused
  uint32_t off;   // byte offset in the working string
  uint32_t len;   // bytes
  int32_t prev;
  int32_t next;
};

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  TARMAC_RETURN_IF_ERROR(t->Init());
  return t;
}

Status Tokenizer::Init() {
  const size_t n = vocab_.tokens.size();
  if (n == 0) return InvalidArgument("tokenizer: vocabulary is empty");
  if (n > (1u << 30)) return InvalidArgument("tokenizer: vocabulary of {} tokens is too large", n);
  if (!vocab_.types.empty() && vocab_.types.size() != n)
    return InvalidArgument("tokenizer: {} token types for {} tokens", vocab_.types.size(), n);
  if (vocab_.types.empty()) vocab_.types.assign(n, TokenType::kNormal);
  if (vocab_.kind == VocabKind::kSpm && vocab_.scores.size() != n)
    return InvalidArgument("tokenizer: {} scores for {} tokens", vocab_.scores.size(), n);
  for (int32_t* id : {&vocab_.bos_id, &vocab_.eos_id, &vocab_.unk_id, &vocab_.pad_id,
                      &vocab_.eot_id}) {
    if (*id < -1 || *id >= static_cast<int32_t>(n))
      return InvalidArgument("tokenizer: special token id {} outside the vocabulary of {}", *id, n);
  }
  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // Duplicate texts exist in real vocabularies (unused slots); the first id wins, as in
    // the reference implementations.
    token_to_id_.emplace(vocab_.tokens[i], static_cast<int32_t>(i));
    const TokenType ty = vocab_.types[i];
    if ((ty == TokenType::kControl || ty == TokenType::kUserDefined) && !vocab_.tokens[i].empty())
      special_ids_.push_back(static_cast<int32_t>(i));
  }
  std::sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
    const size_t la = vocab_.tokens[a].size(), lb = vocab_.tokens[b].size();
    return la != lb ? la > lb : a < b;
  });

  std::fill(std::begin(byte_tokens_), std::end(byte_tokens_), -1);
  if (vocab_.kind == VocabKind::kSpm) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_tokens_[b] = Find(name);
    }
  } else {
    for (int b = 0; b < 256; ++b) {
      byte_tokens_[b] = Find(ByteToUnicode(static_cast<uint8_t>(b)));
      if (byte_tokens_[b] < 0)
        return InvalidArgument("tokenizer: byte-level BPE vocabulary lacks the token for byte 0x{:02X}", b);
    }
    merges_.reserve(vocab_.merges.size());
    for (size_t r = 0; r < vocab_.merges.size(); ++r) {
      const std::string& m = vocab_.merges[r];
      // Split at the first space after the first character: a side may itself start with a
      // character whose mapped form is not a space, so the first space is the separator.
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size())
        return InvalidArgument("tokenizer: merge {} '{}' is not 'left right'", r, m);
      const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
      const int32_t l = Find(left), rr = Find(right), merged = Find(left + right);
      if (l < 0 || rr < 0 || merged < 0) continue;  // unreachable merge: harmless, skip
      const uint64_t key = (static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(rr);
      merges_.emplace(key, (static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(merged));
    }
    TARMAC_ASSIGN_OR_RETURN(pre_, PreTokenizer::Create(vocab_.pre));
  }
  return Status::Ok();
}

int32_t Tokenizer::Find(std::string_view text) const {
  auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

bool Tokenizer::IsControl(int32_t id) const {
  return id >= 0 && id < n_vocab() && vocab_.types[id] == TokenType::kControl;
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return id >= 0 && (id == vocab_.eos_id || id == vocab_.eot_id);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& opts) const {
  encode_calls_.fetch_add(1, std::memory_order_relaxed);
  std::vector<int32_t> out;
  if (opts.add_special && vocab_.add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);

  // Fragments: plain text between special tokens (only when parse_special).
  bool prev_special = true;  // SPM adds its space prefix to text that follows a special token
  size_t start = 0, i = 0;
  size_t next_range = 0;
  while (opts.parse_special && i < text.size()) {
    if (opts.literal_ranges != nullptr) {  // skip literal text (the fragment goes on)
      const auto& ranges = *opts.literal_ranges;
      while (next_range < ranges.size() && ranges[next_range].second <= i) ++next_range;
      if (next_range < ranges.size() && ranges[next_range].first <= i) {
        i = ranges[next_range].second;
        continue;
      }
    }
    int32_t hit = -1;
    for (int32_t id : special_ids_) {
      const std::string& s = vocab_.tokens[id];
      if (text.compare(i, s.size(), s) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    if (i > start) {
      EncodeText(text.substr(start, i - start), prev_special, &out);
      prev_special = false;
    }
    out.push_back(hit);
    prev_special = true;
    i += vocab_.tokens[hit].size();
    start = i;
  }
  if (start < text.size()) EncodeText(text.substr(start), prev_special, &out);

  if (opts.add_special && vocab_.add_eos && vocab_.eos_id >= 0) out.push_back(vocab_.eos_id);
  return out;
}

void Tokenizer::EncodeText(std::string_view text, bool after_special,
                           std::vector<int32_t>* out) const {
  if (vocab_.kind == VocabKind::kSpm) {
    std::string s;
    if (vocab_.add_space_prefix && after_special) s.push_back(' ');
    s.append(text);
    EncodeSpm(ReplaceAll(s, " ", kSpmSpace), out);
    return;
  }
  std::vector<std::string_view> words;
  pre_->Split(text, &words);
  for (std::string_view w : words) EncodeBpeWord(w, out);
}

void Tokenizer::EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({byte_tokens_[static_cast<uint8_t>(word[i])], static_cast<uint32_t>(i), 1,
                   k - 1, k + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // Min-heap of candidate merges by (rank, left position): lowest rank first, leftmost among
  // equals. Stale entries (a side already merged away) are skipped when popped.
  struct Cand {
    uint32_t rank;
    int32_t left;
    int32_t left_id, right_id, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto try_push = [&](int32_t l) {
    if (l < 0 || sym[l].next < 0) return;
    const int32_t r = sym[l].next;
    const uint64_t key = (static_cast<uint64_t>(sym[l].id) << 32) | static_cast<uint32_t>(sym[r].id);
    auto it = merges_.find(key);
    if (it == merges_.end()) return;
    heap.push({static_cast<uint32_t>(it->second >> 32), l, sym[l].id, sym[r].id,
               static_cast<int32_t>(it->second & 0xffffffffu)});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.len == 0 || l.id != c.left_id || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (r.id != c.right_id) continue;
    l.id = c.merged;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_push(l.prev);
    try_push(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

void Tokenizer::EncodeSpm(std::string_view text, std::vector<int32_t>* out) const {
  // Start from UTF-8 characters; repeatedly merge the adjacent pair whose concatenation is a
  // token with the highest score (leftmost among equals).
  std::vector<Symbol> sym;
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min<size_t>(Utf8SeqLen(static_cast<uint8_t>(text[i])), text.size() - i);
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({-1, static_cast<uint32_t>(i), static_cast<uint32_t>(len), k - 1, k + 1});
    i += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Cand {
    float score;
    int32_t left;
    uint32_t size;  // bytes of the merged text: detects stale entries
    bool operator<(const Cand& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Cand> heap;
  auto try_push = [&](int32_t l) {
    if (l < 0 || sym[l].next < 0) return;
    const Symbol& r = sym[sym[l].next];
    const int32_t id = Find(text.substr(sym[l].off, sym[l].len + r.len));
    if (id < 0) return;
    heap.push({vocab_.scores[id], l, sym[l].len + r.len});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.len == 0 || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (l.len + r.len != c.size) continue;  // one side changed since this was pushed
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_push(l.prev);
    try_push(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    std::string_view piece = text.substr(sym[i].off, sym[i].len);
    const int32_t id = Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // Not in the vocabulary: byte fallback, else the unknown token.
    for (char ch : piece) {
      const int32_t b = byte_tokens_[static_cast<uint8_t>(ch)];
      if (b >= 0) {
        out->push_back(b);
      } else if (vocab_.unk_id >= 0) {
        out->push_back(vocab_.unk_id);
        break;
      }
    }
  }
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return "";
  const std::string& text = vocab_.tokens[id];
  switch (vocab_.types[id]) {
    case TokenType::kControl:
    case TokenType::kUnused:
      return render_special ? text : "";
    case TokenType::kUserDefined:
      return text;
    case TokenType::kByte:
      if (vocab_.kind == VocabKind::kSpm && text.size() == 6 && text.rfind("<0x", 0) == 0)
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      break;
    case TokenType::kUnknown:
      if (vocab_.kind == VocabKind::kSpm) return " \xE2\x81\x87 ";  // " ⁇ "
      break;
    default:
      break;
  }
  if (vocab_.kind == VocabKind::kSpm) return ReplaceAll(text, kSpmSpace, " ");
  std::string out;
  for (size_t p = 0; p < text.size();) {
    const uint32_t cp = DecodeUtf8(text, &p);
    const int b = UnicodeToByte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      AppendUtf8(cp, &out);  // not byte-mapped (added tokens): keep as is
    }
  }
  return out;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  bool strip = vocab_.kind == VocabKind::kSpm && vocab_.add_space_prefix;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = TokenToPiece(ids[i], render_special);
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

}  // namespace tarmac::tok
