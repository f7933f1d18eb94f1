// OmissionPlan: which layer groups are omitted (reconstructed) and, for each, the
// exact anchor layers its predictor reads. Layers are split into consecutive
// groups of `group_width` layers, numbered from 1 (G1 = layers 0..1, G2 =
// layers 2..3, ...). A group's anchors are the nearest kept layers on each
// side, so anchors depend on the whole omitted set: G2..G5 omitted together
// all use G1 and G6. Explicit anchor lists override that rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cost_model/model_spec.hpp"

namespace kvshift::cost_model {

/// One omitted group: the layers it rebuilds and the layers it reads.
struct GroupPlan {
  int group = 0;                   ///< 1-based group number
  std::vector<int> target_layers;  ///< ascending, 0-based
  std::vector<int> anchor_layers;  ///< ascending, 0-based; left side first
};

struct OmissionOptions {
  int group_width = 2;   ///< layers per group
  int anchor_width = 2;  ///< kept layers taken on each side of a group
};

class OmissionPlan {
 public:
  OmissionPlan() = default;

  /// Omits `groups` (1-based) of a `layers`-layer model; anchors by the nearest-kept rule.
  /// Throws InputError for out-of-range or repeated groups, or a side with too few kept layers.
  static OmissionPlan from_groups(int layers, std::vector<int> groups,
                                  OmissionOptions options = {});

  /// Uses the given plans as they are (explicit anchors), after validating them.
  static OmissionPlan from_plans(int layers, std::vector<GroupPlan> plans, int group_width = 2);

  /// Parses "none", "paper" (the paper's Table I choice for `model`), "G2,G5" or "G2-G5".
  static OmissionPlan parse(std::string_view text, const ModelSpec& model,
                            OmissionOptions options = {});

  int layers() const { return layers_; }
  int group_width() const { return group_width_; }
  int group_count() const { return (layers_ + group_width_ - 1) / group_width_; }
  const std::vector<GroupPlan>& groups() const { return groups_; }
  bool empty() const { return groups_.empty(); }
  /// Number of layers whose KV is omitted.
  int omitted_layers() const { return omitted_layers_; }
  /// First rows of every omitted layer that are sent exact all the same (attention sinks; the
  /// predictors rebuild the rest). 0: every row is rebuilt.
  int sink_rows() const { return sink_rows_; }
  /// The same plan with `rows` sink rows; InputError when negative.
  OmissionPlan with_sink_rows(int rows) const;
  /// "G2,G3,G4,G5" (or "none").
  std::string describe() const;

 private:
  int layers_ = 0;
  int group_width_ = 2;
  int omitted_layers_ = 0;
  int sink_rows_ = 0;
  std::vector<GroupPlan> groups_;
};

/// The paper's Table I topology for `model`, as group numbers; empty if the paper has none.
std::vector<int> paper_omitted_groups(std::string_view model_name);

}  // namespace kvshift::cost_model
