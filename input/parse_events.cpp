// The "events" section: a timeline of node and GPU failures and repairs, link
// degradation, failure and repair, planned drains, and transfer-engine faults
// on one source -> destination path (a stall, or a failure). Each type has its own
// required and allowed fields; a field that does not apply is an error (it
// would otherwise be silently ignored). Events are returned sorted by time
// (stable: equal times keep file order); ctx.event_order maps them back.
#include <algorithm>
#include <numeric>

#include "input/scenario_keys.hpp"
#include "input/scenario_parts.hpp"

namespace kvshift::input::detail {
namespace {

struct EventRule {
  std::string_view type;
  sim::EventKind kind;
  std::initializer_list<std::string_view> required;
  std::initializer_list<std::string_view> optional;
};

const EventRule kRules[] = {
    {"node_failure", sim::EventKind::kNodeFailure, {"node"}, {"detection_delay", "repair_after"}},
    {"node_repair", sim::EventKind::kNodeRepair, {"node"}, {}},
    {"gpu_failure",
     sim::EventKind::kGpuFailure,
     {"node"},
     {"gpu", "detection_delay", "repair_after"}},
    {"link_degrade",
     sim::EventKind::kLinkDegrade,
     {"link"},
     {"bandwidth", "latency", "repair_after"}},
    {"link_failure", sim::EventKind::kLinkFailure, {"link"}, {"repair_after"}},
    {"link_repair", sim::EventKind::kLinkRepair, {"link"}, {}},
    {"drain", sim::EventKind::kDrain, {"node"}, {}},
    {"path_stall", sim::EventKind::kPathStall, {"from", "to"}, {"repair_after"}},
    {"path_failure", sim::EventKind::kPathFailure, {"from", "to"}, {"repair_after"}},
};

bool listed(std::initializer_list<std::string_view> l, std::string_view k) {
  return std::find(l.begin(), l.end(), k) != l.end();
}

std::optional<sim::EventSpec> parse_event(const Reader& e) {
  e.allow_only(keys::kEvent);
  auto type = e.string("type");
  auto at = e.duration("at");
  if (!type) return std::nullopt;
  const EventRule* rule = nullptr;
  std::string names;
  std::vector<std::string> all;
  for (const EventRule& r : kRules) {
    if (r.type == *type) rule = &r;
    names += (names.empty() ? "\"" : ", \"") + std::string(r.type) + "\"";
    all.emplace_back(r.type);
  }
  if (!rule) {
    const std::string msg =
        "expected one of " + names + " (got \"" + *type + "\")" + closest_name(*type, all);
    e.problem("type", msg);
    return std::nullopt;
  }
  for (std::string_view k : keys::kEvent) {
    if (k == "type" || k == "at" || !e.has(k)) continue;
    if (!listed(rule->required, k) && !listed(rule->optional, k)) {
      e.problem(k, "does not apply to event type \"" + std::string(rule->type) + "\"");
    }
  }
  sim::EventSpec ev;
  ev.kind = rule->kind;
  if (listed(rule->required, "node")) ev.node = e.string("node").value_or("");
  if (listed(rule->required, "link")) ev.link = e.string("link").value_or("");
  if (listed(rule->optional, "gpu"))
    ev.gpu = static_cast<int>(int_in(e, "gpu", 0, 65535, false).value_or(0));
  if (listed(rule->required, "from")) {
    ev.from = e.string("from").value_or("");
    ev.to = e.string("to").value_or("");
    if (!ev.from.empty() && ev.from == ev.to) e.problem("to", "a path joins two different nodes");
  }
  if (listed(rule->optional, "detection_delay")) {
    ev.detection_delay =
        duration_at_least0(e, "detection_delay", false, false).value_or(Seconds{0});
  }
  if (listed(rule->optional, "repair_after")) {
    ev.repair_after = duration_at_least0(e, "repair_after", true, false);
  }
  if (ev.kind == sim::EventKind::kLinkDegrade) {
    ev.bandwidth = positive_bandwidth(e, "bandwidth", false);
    ev.latency = duration_at_least0(e, "latency", false, false);
    if (!e.has("bandwidth") && !e.has("latency")) {
      e.problem("link_degrade needs \"bandwidth\" or \"latency\" (the degraded value)");
    }
  }
  if (!at) return std::nullopt;
  ev.at = *at;
  return ev;
}

}  // namespace

std::vector<sim::EventSpec> parse_events(const Reader& top, LoadContext& ctx) {
  std::vector<sim::EventSpec> events;
  std::vector<std::size_t> origin;
  std::size_t index = 0;
  top.each(
      "events",
      [&](const Reader& e) {
        if (auto ev = parse_event(e)) {
          events.push_back(*ev);
          origin.push_back(index);
        }
        ++index;
      },
      false);
  std::vector<std::size_t> order(events.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return events[a].at < events[b].at; });
  std::vector<sim::EventSpec> sorted;
  ctx.event_order.clear();
  for (std::size_t i : order) {
    sorted.push_back(events[i]);
    ctx.event_order.push_back(origin[i]);
  }
  return sorted;
}

}  // namespace kvshift::input::detail
