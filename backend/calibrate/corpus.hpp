// Calibration requests from a token file: a corpus of little-endian int32 ids
// cut into disjoint windows of history + eval tokens, spread evenly over the
// whole corpus (so no set is all Genesis), then dealt to the fit / selection /
// test (/ confirmation) / order sets in a seeded random order (in that order,
// so order:0 deals the sets the old, in-sample procedure had). Checks that every id
// fits the model's vocabulary and, when the corpus has a JSON sidecar
// (<name>.json with "vocab_size"), that it was tokenised for this vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvshift::backend::calibrate {

/// How many requests each set gets. The selection requests are order + select: the order
/// set ranks the candidates, the selection set gates the prefixes (crossfit.hpp).
struct RequestCounts {
  int fit = 48;
  int select = 32;
  int test = 48;
  int confirm = 0;  ///< stable-split's confirmation set
  int order = 16;   ///< 0: order on the selection set itself (in-sample, not cross-fitted)
  int total() const { return fit + select + test + confirm + order; }
};

/// Parses "fit:48,order:16,select:32,test:48[,confirm:24]" (keys in any order, each at most once;
/// missing keys keep `defaults`). Throws InputError naming `field`.
RequestCounts parse_request_counts(const std::string& text, const RequestCounts& defaults,
                                   const std::string& field);

/// One request: the window's first token in the corpus.
struct Window {
  std::int64_t start = 0;
};

struct RequestSets {
  std::vector<Window> fit, select, test, confirm, order;
};

/// Reads a token file; throws InputError naming `path` (missing, empty, size not a multiple of 4).
std::vector<std::int32_t> read_tokens(const std::string& path);

/// Checks ids against `vocab` and the sidecar's vocab_size; throws InputError.
void check_vocabulary(const std::vector<std::int32_t>& tokens, int vocab,
                      const std::string& tokens_path, const std::string& model_folder);

/// A share [begin, end) of a corpus, as fractions of its tokens: how a training set and its
/// held-out evaluation are kept apart on one token file.
struct CorpusSpan {
  double begin = 0.0;
  double end = 1.0;
  bool overlaps(const CorpusSpan& o) const { return begin < o.end && o.begin < end; }
};
/// Parses "A:B" with 0 <= A < B <= 1; throws InputError naming `field`.
CorpusSpan parse_span(const std::string& text, const std::string& field);
/// "A:B" as parse_span reads it.
std::string span_text(const CorpusSpan& span);
/// First-token offsets of `count` disjoint windows of `window` tokens spread evenly over `span` of
/// a corpus of `corpus_tokens` tokens, ascending. Throws InputError (naming --corpus and the
/// need) when the span is too short.
std::vector<std::int64_t> spread_windows(std::int64_t corpus_tokens, const CorpusSpan& span,
                                         std::int64_t window, std::int64_t count);

/// Cuts `corpus_tokens` into counts.total() disjoint windows of `window` tokens and deals them.
/// Throws InputError (naming --corpus and the need) when the corpus is too short.
RequestSets make_request_sets(std::int64_t corpus_tokens, std::int64_t window,
                              const RequestCounts& counts, std::uint64_t seed);

}  // namespace kvshift::backend::calibrate
