#include "cost_model/storage.hpp"

#include <algorithm>

namespace kvshift::cost_model {

std::int64_t folded_params(const ModelSpec& m, const GroupPlan& g) {
  const std::int64_t in = static_cast<std::int64_t>(g.anchor_layers.size()) * m.kv_width();
  const std::int64_t out = static_cast<std::int64_t>(g.target_layers.size()) * m.kv_width();
  return in * out + out;
}

std::int64_t unfolded_params(const ModelSpec& m, const GroupPlan& g) {
  const std::int64_t in = static_cast<std::int64_t>(g.anchor_layers.size()) * m.kv_width();
  const std::int64_t out = static_cast<std::int64_t>(g.target_layers.size()) * m.hidden;
  return in * out + out;
}

StorageReport storage(const ModelSpec& m, const OmissionPlan& t, std::int64_t tokens,
                      const StorageOptions& options) {
  StorageReport r;
  const std::int64_t per_layer = tokens * m.kv_bytes_per_layer_token();
  r.kv_full = Bytes{m.layers * per_layer};
  // An omitted layer's sink rows are sent all the same.
  const std::int64_t rebuilt = tokens - std::min<std::int64_t>(t.sink_rows(), tokens);
  r.kv_saved = Bytes{t.omitted_layers() * rebuilt * m.kv_bytes_per_layer_token()};
  r.kv_kept = r.kv_full - r.kv_saved;
  r.omitted_fraction =
      r.kv_full.count > 0 ? static_cast<double>(r.kv_saved.count) / r.kv_full.count : 0.0;

  const int bp = dtype_bytes(options.predictor_dtype);
  std::int64_t max_folded = 0, max_unfolded = 0;
  for (const GroupPlan& g : t.groups()) {
    const std::int64_t f = folded_params(m, g), u = unfolded_params(m, g);
    r.predictor_params += f;
    r.unfolded_predictor_params += u;
    max_folded = std::max(max_folded, f);
    max_unfolded = std::max(max_unfolded, u);
  }
  r.predictor_bytes_per_group = Bytes{max_folded * bp};
  r.unfolded_bytes_per_group = Bytes{max_unfolded * bp};
  r.predictor_bytes_total = Bytes{r.predictor_params * bp};

  r.sharing = options.sharing;
  r.net_saving_bytes = options.sharing * r.kv_saved.count - r.predictor_bytes_total.count;
  if (r.kv_saved.count > 0) {
    const std::int64_t pred = r.predictor_bytes_total.count, saved = r.kv_saved.count;
    r.break_even_requests = (pred + saved - 1) / saved;  // ceil: least N with N·saved ≥ pred
    r.predictor_to_saved_ratio = static_cast<double>(pred) / static_cast<double>(saved);
  }
  return r;
}

}  // namespace kvshift::cost_model
