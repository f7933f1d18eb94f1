// Flows files: the documented format, generators, and every bad-input path.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

#include "cost_model/input_error.hpp"
#include "input/flows_file.hpp"

namespace kvshift::input {
namespace {

FlowsFile parse(const std::string& text) {
  return parse_flows(parse_json_text(text, "f.json"), "f.json");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const char* kIssueExample = R"({"cluster": {
   "nodes": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
   "links": [{"name": "L1", "a": "A", "b": "B", "bandwidth": "1Gbps", "latency": "1ms", "duplex": "half"},
             {"name": "L2", "a": "B", "b": "C", "bandwidth": "10Gbps", "latency": "50us"}]},
 "transfers": [{"id": "t1", "src": "A", "dst": "C", "bytes": 1000000000, "start": "0.5s",
                "route": ["L1", "L2"]}]})";

TEST(FlowsFile, ReadsTheDocumentedFormat) {
  const FlowsFile f = parse(kIssueExample);
  ASSERT_EQ(f.topology.node_count(), 3u);
  ASSERT_EQ(f.topology.link_count(), 2u);
  const sim::ClusterLink& l1 = f.topology.link(0);
  EXPECT_EQ(l1.name, "L1");
  EXPECT_EQ(l1.bandwidth.value, 1e9);
  EXPECT_EQ(l1.latency, sim::milliseconds(1));
  EXPECT_EQ(l1.duplex, sim::Duplex::kHalf);
  EXPECT_EQ(f.topology.link(1).duplex, sim::Duplex::kFull);
  ASSERT_EQ(f.transfers.size(), 1u);
  const FlowTransfer& t = f.transfers[0];
  EXPECT_EQ(t.id, "t1");
  EXPECT_EQ(t.bytes.count, 1'000'000'000);
  EXPECT_EQ(t.start, sim::milliseconds(500));
  EXPECT_EQ(t.route, (std::vector<sim::LinkId>{0, 1}));
}

TEST(FlowsFile, IssueExampleFinishesAtTheClosedForm) {
  FlowsFile f = parse(kIssueExample);
  const auto out = simulate_flows(f);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].state, sim::TransferState::kFinished);
  // 0.5 s + 1 ms + 50 us + 8e9 bit / 1 Gbps.
  EXPECT_EQ(out[0].finish, sim::SimTime{8'501'050'000});
}

TEST(FlowsFile, BytesAcceptUnitStringsAndStartDefaultsToZero) {
  FlowsFile f = parse(R"({"cluster": {"nodes": [{"name": "A"}, {"name": "B"}],
    "links": [{"a": "A", "b": "B", "bandwidth": "8Gbps"}]},
    "transfers": [{"id": "x", "src": "B", "dst": "A", "bytes": "1GiB"}]})");
  EXPECT_EQ(f.transfers[0].bytes.count, 1LL << 30);
  EXPECT_EQ(f.transfers[0].start, sim::SimTime{0});
  EXPECT_EQ(simulate_flows(f)[0].finish, sim::SimTime{1'073'741'824});
}

TEST(FlowsFile, GeneratorsAddNodesAndLinksBeforeExplicitOnes) {
  const FlowsFile f = parse(R"({"cluster": {"leaf_spine": {"leaves": 2, "spines": 2,
      "nodes_per_leaf": 3, "node_bandwidth": "100Gbps", "latency": "1us", "oversubscription": 3},
    "nodes": [{"name": "store", "kind": "storage", "capacity": "1TB"}],
    "links": [{"name": "s", "a": "store", "b": "spine1", "bandwidth": "400Gbps"}]},
    "transfers": [{"id": "a", "src": "gpu0", "dst": "store", "bytes": 1}]})");
  EXPECT_EQ(f.topology.node_count(), 6u + 2 + 2 + 1);
  EXPECT_EQ(f.topology.link(*f.topology.find_link("leaf0-spine0")).bandwidth.value, 50e9);
  EXPECT_EQ(f.topology.node(*f.topology.find_node("store")).kind, sim::NodeKind::kStorage);
  for (const char* kind : {"star", "ring"}) {
    const FlowsFile g = parse(std::string(R"({"cluster": {")") + kind +
                              R"(": {"nodes": 4, "bandwidth": "1Gbps"}},
        "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu2", "bytes": 1}]})");
    EXPECT_EQ(g.topology.nodes_of_kind(sim::NodeKind::kGpu).size(), 4u) << kind;
  }
  FlowsFile w = parse(R"({"cluster": {"multi_site": {
      "sites": [{"name": "east", "nodes": 2, "lan_bandwidth": "100Gbps", "lan_latency": "1us"},
                {"name": "west", "nodes": 2, "lan_bandwidth": "100Gbps", "lan_latency": "1us"}],
      "wan_bandwidth": "10Gbps", "wan_latency": "20ms"}},
    "transfers": [{"id": "a", "src": "east/gpu0", "dst": "west/gpu1", "bytes": "1GB"}]})");
  ASSERT_EQ(w.transfers.size(), 1u);
  // 20 ms + 2 µs of latency, then 8e9 bit at the 10 Gbps WAN.
  EXPECT_EQ(simulate_flows(w)[0].finish, sim::SimTime{820'002'000});
}

TEST(FlowsFile, EveryProblemIsReportedWithItsJsonPath) {
  const std::string e = error_of(R"({"cluster": {
    "nodes": [{"name": "A"}, {"name": "B"}, {"name": "A"}],
    "links": [{"name": "L1", "a": "A", "b": "Z", "bandwidth": "1Gbps"},
              {"name": "L2", "a": "A", "b": "B", "bandwidth": "0Gbps", "latency": "-1ms"},
              {"name": "L3", "a": "A", "b": "B", "bandwith": "1Gbps", "duplex": "simplex"}]},
    "transfers": [{"id": "t1", "src": "A", "dst": "B", "bytes": -5, "start": "soon"},
                  {"id": "t1", "src": "A", "dst": "B", "bytes": 1, "route": ["L9"]}],
    "extra": 1})");
  for (const char* expected :
       {"f.json: /cluster/nodes/2/name: duplicate node name \"A\"",
        "/cluster/links/0/b: unknown node \"Z\"", "/cluster/links/1/bandwidth: must be > 0",
        "/cluster/links/1/latency:", "/cluster/links/2/bandwith: unknown key",
        "did you mean \"bandwidth\"", "/cluster/links/2/bandwidth: is required",
        "/cluster/links/2/duplex:", "/transfers/0/bytes:", "/transfers/0/start:",
        "/transfers/1/id: duplicate transfer id \"t1\" (first at /transfers/0)",
        "/transfers/1/route/0: unknown link \"L9\"", "/extra: unknown key"}) {
    EXPECT_NE(e.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n" << e;
  }
}

TEST(FlowsFile, DisconnectedTransferNamesBothNodes) {
  const std::string e = error_of(R"({"cluster": {
    "nodes": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
    "links": [{"a": "A", "b": "B", "bandwidth": "1Gbps"}]},
    "transfers": [{"id": "t", "src": "A", "dst": "C", "bytes": 1}]})");
  EXPECT_NE(e.find("/transfers/0: no route from \"A\" to \"C\""), std::string::npos) << e;
}

TEST(FlowsFile, ExplicitRouteMustLeadFromSourceToDestination) {
  const std::string e = error_of(R"({"cluster": {
    "nodes": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
    "links": [{"name": "L1", "a": "A", "b": "B", "bandwidth": "1Gbps"},
              {"name": "L2", "a": "B", "b": "C", "bandwidth": "1Gbps"}]},
    "transfers": [{"id": "t", "src": "A", "dst": "C", "bytes": 1, "route": ["L2"]}]})");
  EXPECT_NE(e.find("/transfers/0/route:"), std::string::npos) << e;
  EXPECT_NE(e.find("does not touch node \"A\""), std::string::npos) << e;
}

TEST(FlowsFile, BadGeneratorsAreInputErrors) {
  EXPECT_NE(error_of(R"({"cluster": {"torus": {}}, "transfers": []})")
                .find("/cluster/torus: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"cluster": {"ring": {"nodes": 2, "bandwidth": "1Gbps"}},
                         "transfers": []})")
                .find("/cluster/ring/nodes: must be"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": {"kind": "star"}, "transfers": []})")
                .find("/generator: unknown key"),
            std::string::npos)
      << "the format before the cluster section";
  EXPECT_NE(error_of("[1, 2]").find("expected a JSON object"), std::string::npos);
}

TEST(FlowsFile, EcmpIsOffByDefaultAndTakesASeed) {
  const std::string topo = R"("cluster": {"leaf_spine": {"leaves": 2, "spines": 4,
      "nodes_per_leaf": 4, "node_bandwidth": "100Gbps"}},
    "transfers": [{"id": "a", "src": "gpu0", "dst": "gpu4", "bytes": "1GB"},
                  {"id": "b", "src": "gpu1", "dst": "gpu5", "bytes": "1GB"},
                  {"id": "c", "src": "gpu2", "dst": "gpu6", "bytes": "1GB"},
                  {"id": "d", "src": "gpu3", "dst": "gpu7", "bytes": "1GB"}])";
  EXPECT_FALSE(parse("{" + topo + "}").ecmp_seed);
  EXPECT_FALSE(parse("{" + topo + R"(, "ecmp": false})").ecmp_seed);
  EXPECT_EQ(parse("{" + topo + R"(, "ecmp": true})").ecmp_seed, 0u);
  FlowsFile on = parse("{" + topo + R"(, "ecmp": {"seed": 11}})");
  EXPECT_EQ(on.ecmp_seed, 11u);
  FlowsFile off = parse("{" + topo + "}");
  // One spine for all four (a quarter of its 100 Gbps uplink each: 8e9 bit in 0.32 s) against
  // several.
  auto last = [](FlowsFile& f) {
    sim::SimTime t;
    for (const FlowOutcome& o : simulate_flows(f)) t = std::max(t, o.finish);
    return t;
  };
  EXPECT_EQ(last(off), sim::SimTime{320'000'000});
  EXPECT_LT(last(on), last(off));
  EXPECT_NE(error_of("{" + topo + R"(, "ecmp": {"seed": -1}})").find("/ecmp/seed: must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("{" + topo + R"(, "ecmp": "yes"})").find("/ecmp: expected true, false"),
            std::string::npos);
  EXPECT_NE(error_of("{" + topo + R"(, "ecmp": {"sed": 1}})").find("/ecmp/sed: unknown key"),
            std::string::npos);
  // A scenario's cluster says it inside the cluster: read the same, but only one of the two.
  std::string inside = topo;
  inside.replace(inside.find(R"("node_bandwidth": "100Gbps"}})"),
                 std::string(R"("node_bandwidth": "100Gbps"}})").size(),
                 R"("node_bandwidth": "100Gbps"}, "ecmp": {"seed": 11}})");
  EXPECT_EQ(parse("{" + inside + "}").ecmp_seed, 11u);
  EXPECT_NE(error_of("{" + inside + R"(, "ecmp": true})").find("/ecmp: given twice"),
            std::string::npos);
}

/// load_flows_file (streamed) on `text` written to a file; its error text, or "".
std::string streamed_error(const std::string& text, FlowsFile* out = nullptr) {
  // One file per test and process: ctest runs this binary's tests side by side.
  const std::string path = ::testing::TempDir() + "kvshift-flows-" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
                           std::to_string(::getpid()) + ".json";
  std::ofstream(path) << text;
  std::string error;
  try {
    FlowsFile f = load_flows_file(path);
    if (out) *out = std::move(f);
  } catch (const InputError& e) {
    error = e.what();
  }
  std::remove(path.c_str());
  return error;
}

TEST(FlowsFile, StreamedReadEqualsTheDomReadWhereverTheTransfersSit) {
  // Transfers first: the streamed reader reads the topology in a first pass.
  const std::string text =
      R"({"transfers": [{"id": "t1", "src": "A", "dst": "C", "bytes": 1000000000,
      "start": "0.5s", "route": ["L1", "L2"]}, {"id": "t2", "src": "C", "dst": "A", "bytes": "1GiB",
      "max_rate": "1Mbps", "extra": {"nested": [1, [2, 3], {"x": null}]}}],
    "cluster": {"nodes": [{"name": "A"}, {"name": "B"}, {"name": "C"}],
    "links": [{"name": "L1", "a": "A", "b": "B", "bandwidth": "1Gbps", "latency": "1ms"},
              {"name": "L2", "a": "B", "b": "C", "bandwidth": "10Gbps", "latency": "50us"}]}})";
  FlowsFile streamed;
  EXPECT_NE(streamed_error(text).find("/transfers/1/extra: unknown key"), std::string::npos);
  std::string fixed = text;
  fixed.replace(fixed.find(R"(, "extra")"),
                std::string(R"(, "extra": {"nested": [1, [2, 3], {"x": null}]})").size(), "");
  ASSERT_EQ(streamed_error(fixed, &streamed), "");
  const FlowsFile dom = parse(fixed);
  ASSERT_EQ(streamed.transfers.size(), 2u);
  EXPECT_EQ(streamed.topology.node_count(), dom.topology.node_count());
  EXPECT_EQ(streamed.topology.link_count(), dom.topology.link_count());
  for (std::size_t i = 0; i < 2; ++i) {
    const FlowTransfer &a = streamed.transfers[i], &b = dom.transfers[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.dst, b.dst);
    EXPECT_EQ(a.bytes.count, b.bytes.count);
    EXPECT_EQ(a.start, b.start);
    EXPECT_EQ(a.route, b.route);
    EXPECT_EQ(a.max_rate.has_value(), b.max_rate.has_value());
  }
  EXPECT_EQ(simulate_flows(streamed)[0].finish, sim::SimTime{8'501'050'000});
}

TEST(FlowsFile, StreamedReadReportsPathsAndSyntaxErrors) {
  const std::string e = streamed_error(R"({"cluster": {"nodes": [{"name": "A"}, {"name": "B"}],
      "links": [{"a": "A", "b": "B", "bandwidth": "1Gbps"}]}, "transfers": [{"id": "a", "src": "A", "dst": "B", "bytes": 1},
      {"id": "a", "src": "Q", "dst": "B", "bytes": 1}, 7], "extra": [1]})");
  for (const char* expected :
       {"/transfers/1/id: duplicate transfer id \"a\" (first at /transfers/0)",
        "/transfers/1/src: unknown node \"Q\"", "/transfers/2:", "/extra: unknown key"}) {
    EXPECT_NE(e.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n" << e;
  }
  const std::string one = R"("cluster": {"nodes": [{"name": "A"}]})";
  EXPECT_NE(streamed_error("{" + one + R"(, "transfers": {"id": 1}})")
                .find("/transfers: expected an array"),
            std::string::npos);
  EXPECT_NE(streamed_error("{" + one + "}").find("/transfers: is required"), std::string::npos);
  EXPECT_NE(streamed_error("{" + one + R"(, "transfers": [{"id": )").find("not valid JSON at byte"),
            std::string::npos);
  EXPECT_NE(streamed_error("[1, 2]").find("expected a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace kvshift::input

namespace kvshift::input {
namespace {

/// A leaf-spine flows document with `n` transfers: starts out of order and in same-ns groups.
std::string mixed_starts(int n) {
  std::string t = R"({"cluster": {"leaf_spine": {"leaves": 3, "spines": 2, "nodes_per_leaf": 4,
      "node_bandwidth": "100Gbps", "latency": "1us", "oversubscription": 2}}, "transfers": [)";
  for (int i = 0; i < n; ++i) {
    const int start_us = (i * 7919) % 97 / 3;  // unsorted, many equal
    t += (i ? ", " : "") + std::string(R"({"id": "x)") + std::to_string(i) + R"(", "src": "gpu)" +
         std::to_string(i % 12) + R"(", "dst": "gpu)" + std::to_string((i * 5 + 3) % 12) +
         R"(", "bytes": )" + std::to_string(1'000'000 + 37'123 * i) + R"(, "start": ")" +
         std::to_string(start_us) + R"(us"})";
  }
  return t + "]}";
}

TEST(FlowsFile, HandingTransfersOverAtTheirStartsGivesTheUpFrontTimes) {
  FlowsFile f = parse(mixed_starts(300));
  // The reference: every transfer submitted up front, records kept (what simulate_flows did).
  sim::Simulator simulator;
  sim::NetworkOptions options;
  options.record_utilisation = false;
  sim::Network network(simulator, f.topology, options);
  for (const FlowTransfer& t : f.transfers) {
    sim::TransferRequest r;
    r.src = t.src;
    r.dst = t.dst;
    r.size = t.bytes;
    r.start = t.start;
    network.submit(std::move(r));
  }
  simulator.run();
  const FlowResults got = run_flows(f);
  ASSERT_EQ(got.finish.size(), 300u);
  EXPECT_TRUE(got.all_finished());
  for (sim::TransferId i = 0; i < 300; ++i) {
    EXPECT_EQ(got.state[i], sim::TransferState::kFinished);
    EXPECT_LE(std::abs(got.finish[i].ns - network.info(i).finish.ns), 1) << "transfer " << i;
  }
}

TEST(FlowsFile, LinesComeInChunksAndReadAsJson) {
  FlowsFile f = parse(mixed_starts(3'000));
  f.transfers[5].id = "quote\"d";
  const FlowResults r = run_flows(f);
  std::string all;
  int chunks = 0;
  write_flow_lines(f, r, [&](std::string_view c) {
    all.append(c);
    ++chunks;
  });
  EXPECT_GT(chunks, 1);
  std::size_t at = 0;
  for (std::size_t i = 0; i < f.transfers.size(); ++i) {
    const std::size_t end = all.find('\n', at);
    ASSERT_NE(end, std::string::npos);
    const Json line = Json::parse(all.substr(at, end - at));
    EXPECT_EQ(line["id"], f.transfers[i].id);
    EXPECT_EQ(line["finish_s"].get<double>(), r.finish[i].seconds());  // round-trips
    at = end + 1;
  }
  EXPECT_EQ(at, all.size());
}

TEST(FlowsFile, DuplicateIdNamesTheFirstEvenWhenThatOneWasRejected) {
  std::string text = R"({"cluster": {"nodes": [{"name": "A"}, {"name": "B"}],
      "links": [{"a": "A", "b": "B", "bandwidth": "1Gbps"}]}, "transfers": [
      {"id": "bad", "src": "Q", "dst": "B", "bytes": 1})";
  for (int i = 1; i <= 100; ++i) {
    text += R"(, {"id": "t)" + std::to_string(i) + R"(", "src": "A", "dst": "B", "bytes": 1})";
  }
  text += R"(, {"id": "bad", "src": "A", "dst": "B", "bytes": 1},
              {"id": "t57", "src": "A", "dst": "B", "bytes": 1}]})";
  for (const std::string& e : {error_of(text), streamed_error(text)}) {
    EXPECT_NE(e.find("/transfers/101/id: duplicate transfer id \"bad\" (first at /transfers/0)"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("/transfers/102/id: duplicate transfer id \"t57\" (first at /transfers/57)"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace kvshift::input
