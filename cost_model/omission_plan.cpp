#include "cost_model/omission_plan.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "cost_model/input_error.hpp"

namespace kvshift::cost_model {
namespace {

std::string group_name(int g) { return "G" + std::to_string(g); }

std::vector<int> group_layers(int group, int width, int layers) {
  std::vector<int> out;
  for (int l = (group - 1) * width; l < std::min(group * width, layers); ++l) out.push_back(l);
  return out;
}

// Nearest `count` kept layers walking from `from` in direction `step`.
std::vector<int> nearest_kept(const std::vector<bool>& omitted, int from, int step, int count) {
  std::vector<int> out;
  for (int l = from;
       l >= 0 && l < static_cast<int>(omitted.size()) && static_cast<int>(out.size()) < count;
       l += step) {
    if (!omitted[l]) out.push_back(l);
  }
  return out;
}

int parse_group_token(std::string_view tok, int group_count) {
  if (!tok.empty() && (tok.front() == 'G' || tok.front() == 'g')) tok.remove_prefix(1);
  int g = 0;
  auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), g);
  if (tok.empty() || ec != std::errc() || end != tok.data() + tok.size()) {
    throw InputError("--topology: expected groups such as \"G2,G5\" or \"G2-G5\" (got \"" +
                     std::string(tok) + "\")");
  }
  if (g < 1 || g > group_count) {
    throw InputError("--topology: " + group_name(g) + " is out of range (the model has " +
                     std::to_string(group_count) + " groups, G1-G" + std::to_string(group_count) +
                     ")");
  }
  return g;
}

}  // namespace

std::vector<int> paper_omitted_groups(std::string_view model_name) {
  if (model_name == "qwen2.5-0.5b") return {2, 3, 4, 5};
  if (model_name == "qwen2.5-1.5b") return {2, 3, 5, 6};
  if (model_name == "tinyllama-1.1b") return {2, 5};
  return {};
}

OmissionPlan OmissionPlan::from_groups(int layers, std::vector<int> groups,
                                       OmissionOptions options) {
  if (options.group_width < 1) throw InputError("topology: group width must be >= 1");
  if (options.anchor_width < 1) throw InputError("topology: anchor width must be >= 1");
  OmissionPlan t;
  t.layers_ = layers;
  t.group_width_ = options.group_width;
  const int count = t.group_count();
  std::sort(groups.begin(), groups.end());
  std::vector<bool> omitted(layers, false);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const int g = groups[i];
    if (g < 1 || g > count) {
      throw InputError("topology: " + group_name(g) + " is out of range (the model has " +
                       std::to_string(count) + " groups of " + std::to_string(t.group_width_) +
                       " layers)");
    }
    if (i > 0 && groups[i - 1] == g) {
      throw InputError("topology: " + group_name(g) + " is listed more than once");
    }
    for (int l : group_layers(g, t.group_width_, layers)) omitted[l] = true;
  }
  for (int g : groups) {
    GroupPlan plan{g, group_layers(g, t.group_width_, layers), {}};
    std::vector<int> left =
        nearest_kept(omitted, plan.target_layers.front() - 1, -1, options.anchor_width);
    std::vector<int> right =
        nearest_kept(omitted, plan.target_layers.back() + 1, +1, options.anchor_width);
    auto need = [&](const std::vector<int>& side, const char* where) {
      if (static_cast<int>(side.size()) < options.anchor_width) {
        throw InputError("topology: " + group_name(g) + " has " + std::to_string(side.size()) +
                         " kept layer(s) on its " + where + " but its predictor needs " +
                         std::to_string(options.anchor_width) +
                         " exact anchor layers on each side");
      }
    };
    need(left, "left");
    need(right, "right");
    std::reverse(left.begin(), left.end());
    plan.anchor_layers = std::move(left);
    plan.anchor_layers.insert(plan.anchor_layers.end(), right.begin(), right.end());
    t.omitted_layers_ += static_cast<int>(plan.target_layers.size());
    t.groups_.push_back(std::move(plan));
  }
  return t;
}

OmissionPlan OmissionPlan::from_plans(int layers, std::vector<GroupPlan> plans, int group_width) {
  OmissionPlan t;
  t.layers_ = layers;
  t.group_width_ = group_width;
  std::set<int> targets;
  std::sort(plans.begin(), plans.end(),
            [](const GroupPlan& a, const GroupPlan& b) { return a.group < b.group; });
  for (const GroupPlan& p : plans) {
    const std::string who = "topology: " + group_name(p.group);
    if (p.target_layers.empty()) throw InputError(who + ": has no target layers");
    if (p.anchor_layers.empty()) throw InputError(who + ": has no anchor layers");
    for (int l : p.target_layers) {
      if (l < 0 || l >= layers) {
        throw InputError(who + ": target layer " + std::to_string(l) + " is out of range [0, " +
                         std::to_string(layers) + ")");
      }
      if (!targets.insert(l).second) {
        throw InputError(who + ": target layer " + std::to_string(l) + " overlaps another group");
      }
    }
    t.omitted_layers_ += static_cast<int>(p.target_layers.size());
  }
  for (const GroupPlan& p : plans) {
    for (int l : p.anchor_layers) {
      if (l < 0 || l >= layers) {
        throw InputError("topology: " + group_name(p.group) + ": anchor layer " +
                         std::to_string(l) + " is out of range");
      }
      if (targets.count(l)) {
        throw InputError("topology: " + group_name(p.group) + ": anchor layer " +
                         std::to_string(l) + " is itself omitted");
      }
    }
  }
  t.groups_ = std::move(plans);
  return t;
}

OmissionPlan OmissionPlan::parse(std::string_view text, const ModelSpec& model,
                                 OmissionOptions options) {
  if (text == "none" || text.empty()) return from_groups(model.layers, {}, options);
  if (text == "paper") {
    std::vector<int> groups = paper_omitted_groups(model.name);
    if (groups.empty()) {
      throw InputError("--topology: the paper reports no topology for \"" + model.name +
                       "\" (it has qwen2.5-0.5b, qwen2.5-1.5b, tinyllama-1.1b); name groups, "
                       "e.g. --topology G2,G5");
    }
    return from_groups(model.layers, std::move(groups), options);
  }
  const int count = (model.layers + options.group_width - 1) / options.group_width;
  std::vector<int> groups;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      groups.push_back(parse_group_token(item, count));
    } else {
      const int lo = parse_group_token(item.substr(0, dash), count);
      const int hi = parse_group_token(item.substr(dash + 1), count);
      if (hi < lo) {
        throw InputError("--topology: range \"" + std::string(item) + "\" runs backwards");
      }
      for (int g = lo; g <= hi; ++g) groups.push_back(g);
    }
    pos = comma + 1;
  }
  return from_groups(model.layers, std::move(groups), options);
}

OmissionPlan OmissionPlan::with_sink_rows(int rows) const {
  if (rows < 0) {
    throw InputError("sink_rows: must be >= 0 rows (got " + std::to_string(rows) + ")");
  }
  OmissionPlan p = *this;
  p.sink_rows_ = rows;
  return p;
}

std::string OmissionPlan::describe() const {
  if (groups_.empty()) return "none";
  std::string out;
  for (const GroupPlan& p : groups_) out += (out.empty() ? "" : ",") + group_name(p.group);
  return out;
}

}  // namespace kvshift::cost_model
