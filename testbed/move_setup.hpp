// What a real move runs on, loaded once: the model's weights (a model folder, or
// seeded random weights of the scenario model's shape), RISK-KV's calibrated
// predictors, ProxyKV's trained mapper with its proxy, and the corpus contexts
// are drawn from; and what each strategy ships of a request's KV. Shared by
// `kvshift testbed` (moves one at a time) and `kvshift replay` (a scenario
// served by node processes).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/model.hpp"
#include "backend/proxy_mapper.hpp"
#include "backend/reconstruct.hpp"
#include "cost_model/move_plan.hpp"
#include "input/scenario_spec.hpp"
#include "testbed/kv_payload.hpp"
#include "testbed/shaper.hpp"
#include "testbed/transfer.hpp"

namespace kvshift::testbed {

/// Where the real components come from (command-line flags; empty: the scenario's live
/// section, else seeded random weights or predictors, said in `*_source`).
struct ModelInputs {
  std::string model_dir;   ///< --model-dir
  std::string predictors;  ///< --predictors
  std::string mapper;      ///< --mapper (mapper.safetensors beside its mapper.json)
  std::string corpus;      ///< --corpus (little-endian int32 token ids)
  std::uint64_t seed = 1;  ///< random weights, predictors and contexts
};

struct MoveSetup {
  std::unique_ptr<backend::Model> model;
  std::vector<backend::GroupPredictor> predictors;  ///< one per omitted group of the topology
  std::string weights_source, predictors_source;
  std::vector<std::int32_t> corpus;  ///< --corpus's ids (empty: seeded random contexts)
  /// --mapper: the trained mapper, the proxy it reads and (repeat features) KVZip's prompt.
  std::unique_ptr<backend::HybridAxialMapper> mapper;
  std::unique_ptr<backend::Model> proxy;
  std::vector<std::int32_t> repeat_prompt;
  std::string proxykv_scores = "H2O's scores of the target's prefill (no --mapper)";
};

/// Loads them; InputError naming the flag (or JSON field) for what does not fit the scenario.
MoveSetup load_setup(const input::ScenarioSpec& spec, const ModelInputs& inputs);

/// The scenario's GPU nodes, in order.
std::vector<std::string> gpu_names(const input::ScenarioSpec& spec);

/// The KV's dtype on the wire: fp32 for an fp32 model, else fp16.
WireDType wire_dtype(const cost_model::ModelSpec& m);

/// ProxyKV's scores [layers·kv_heads, ids.size()] of a context: the trained mapper's on its
/// proxy, else H2O's from `prefill`'s attention mass (stats.mass), or from a scoring prefill
/// of `ids` when `prefill` is null.
backend::Matrix proxykv_scores_of(const MoveSetup& s, std::span<const std::int32_t> ids,
                                  const backend::ForwardResult* prefill);

/// The payload a KV-shipping strategy sends of `cache`, the KV of `ids`: every layer (full
/// KV), the kept layers (RISK-KV), or the tokens `scores` rank highest per KV head (ProxyKV;
/// null: proxykv_scores_of(ids), scored now).
KvPayload ship(cost_model::Strategy strategy, const input::ScenarioSpec& spec, const MoveSetup& s,
               std::span<const std::int32_t> ids, const backend::KvCache& cache,
               const backend::Matrix* scores);

/// `tokens` ids from the corpus at an offset `seed` picks, with the `following` ones after
/// them in `after`; without a corpus, seeded random ids (and `after` empty).
std::vector<std::int32_t> context_ids(const MoveSetup& s, std::int64_t tokens, std::uint64_t seed,
                                      std::int64_t following, std::vector<std::int32_t>& after);

/// How a move's payload of `bytes_to_send` is sent along `path`: frames of about 250 us at
/// its bottleneck, a window of two round trips, and a deadline of 30 s plus 20x its ideal time.
SendOptions send_options(const ShapedPath& path, const FaultSpec& faults,
                         std::size_t bytes_to_send);

}  // namespace kvshift::testbed
