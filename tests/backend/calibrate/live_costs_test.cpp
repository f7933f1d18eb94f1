// The real inputs of a profile and the live cost source: predictors that do
// not fit the topology or the model are refused by name; live measurements
// agree with a profile of the same shapes; ProxyKV scoring is priced with the
// proxy's own weights; every measured shape is counted in sources().
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "backend/calibrate/predictor_file.hpp"
#include "backend/calibrate/profile_inputs.hpp"
#include "backend/live_costs.hpp"
#include "backend/proxy_mapper.hpp"
#include "backend/reconstruct.hpp"
#include "backend/weights.hpp"
#include "cost_model/input_error.hpp"
#include "input/spec_files.hpp"
#include "tests/testing/model_folder.hpp"

namespace kvshift::backend::calibrate {
namespace {

namespace fs = std::filesystem;

/// An 8-layer Llama folder with weights, and predictors files for its topologies (seeded).
struct Folder {
  fs::path dir;
  cost_model::ModelSpec spec;
  explicit Folder(const std::string& tag, int hidden = 64) {
    dir = fs::temp_directory_path() / ("kvshift-live-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    testing::write_llama_folder(dir / "model", {.hidden = hidden,
                                                .layers = 8,
                                                .heads = 4,
                                                .kv_heads = 2,
                                                .head_dim = hidden / 4,
                                                .intermediate = 2 * hidden,
                                                .vocab = 256});
    spec = input::resolve_model((dir / "model").string());
  }
  ~Folder() { fs::remove_all(dir); }
  std::string model() const { return (dir / "model").string(); }
  /// predictors.safetensors holding the groups of `topology` (seeded weights).
  std::string predictors(const std::string& topology, const std::string& name) const {
    std::vector<FittedGroup> groups;
    const auto t = cost_model::OmissionPlan::parse(topology, spec);
    for (const auto& g : t.groups()) {
      groups.push_back({.group = g.group, .predictor = random_predictor(spec, g, 5 + g.group)});
    }
    const fs::path path = dir / name;
    std::ofstream(path, std::ios::binary)
        << predictors_safetensors(groups, cost_model::DType::kF32, spec.name);
    return path.string();
  }
};

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileInputs, LoadsTheCalibratedPredictorsOfTheTopologyInItsOrder) {
  const Folder f("order");
  const auto topology = cost_model::OmissionPlan::parse("G2,G3", f.spec);
  const ProfileInputs in = load_profile_inputs(
      {.model = f.model(), .predictors = f.predictors("G3,G2", "p.st")}, topology);
  ASSERT_TRUE(in.target && in.predictors);
  ASSERT_EQ(in.predictors->size(), 2u);
  EXPECT_EQ(in.predictors->at(0).target_layers, topology.groups()[0].target_layers);
  EXPECT_EQ(in.predictors->at(1).target_layers, topology.groups()[1].target_layers);
  // The very weights of the file, not a fresh draw.
  const GroupPredictor want = random_predictor(f.spec, topology.groups()[0], 5 + 2);
  EXPECT_EQ((in.predictors->at(0).weight - want.weight).norm(), 0.0f);
  EXPECT_TRUE(in.predictors_origin.digest.starts_with("fnv1a64:"));
  EXPECT_EQ(in.target_origin.digest, digest_path(f.model()));
}

TEST(ProfileInputs, RefusesPredictorsOfAnotherTopologyOrModelByName) {
  const Folder f("wrong");
  const auto topology = cost_model::OmissionPlan::parse("G3", f.spec);
  const std::string other_groups = f.predictors("G2", "g2.st");
  std::string m = message(
      [&] { load_profile_inputs({.model = f.model(), .predictors = other_groups}, topology); });
  EXPECT_NE(m.find("--predictors"), std::string::npos) << m;
  EXPECT_NE(m.find("no predictor for G3"), std::string::npos) << m;
  EXPECT_NE(m.find("it holds G2"), std::string::npos) << m;
  // Predictors calibrated on a model of another width.
  const Folder narrow("narrow", 32);
  const std::string narrow_file = narrow.predictors("G3", "n.st");
  m = message(
      [&] { load_profile_inputs({.model = f.model(), .predictors = narrow_file}, topology); });
  EXPECT_NE(m.find("--predictors"), std::string::npos) << m;
  m = message([&] { load_profile_inputs({.predictors = other_groups}, topology); });
  EXPECT_NE(m.find("needs --model"), std::string::npos) << m;
}

TEST(ProfileInputs, TakesTheMappersProxyAndRefusesAMapperForAnotherTarget) {
  // The committed parity mapper reads 6 proxy channels and writes 5 targets: a 5-layer target
  // with one KV head, whose first 3 layers of 2 heads are the proxy.
  const fs::path dir =
      fs::temp_directory_path() / ("kvshift-live-map-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  testing::write_llama_folder(dir / "model",
                              {.hidden = 16, .layers = 5, .heads = 2, .kv_heads = 1});
  const std::string model = (dir / "model").string();
  const fs::path fixture = fs::path(KVSHIFT_SOURCE_DIR) / "tests/fixtures/mapper_parity";
  auto write_mapper = [&](const std::string& target) {
    fs::copy_file(fixture / "mapper.safetensors", dir / "mapper.safetensors",
                  fs::copy_options::overwrite_existing);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(fixture / "mapper.json"));
    j["dataset"] = {{"proxy", {{"truncated_layers", 3}}}, {"target", {{"name", target}}}};
    std::ofstream(dir / "mapper.json") << j.dump();
    return (dir / "mapper.safetensors").string();
  };
  const std::string name = input::resolve_model(model).name;
  const ProfileInputs in = load_profile_inputs({.model = model, .mapper = write_mapper(name)}, {});
  ASSERT_TRUE(in.proxy && in.mapper);
  EXPECT_EQ(in.proxy->spec.layers, 3);
  EXPECT_NE(in.proxy_origin.path.find("first 3 layers"), std::string::npos);
  const std::string m = message(
      [&] { load_profile_inputs({.model = model, .mapper = write_mapper("another-model")}, {}); });
  EXPECT_NE(m.find("trained for another-model"), std::string::npos) << m;
  const std::string two = message([&] {
    load_profile_inputs({.model = model, .proxy_layers = 2, .mapper = write_mapper(name)}, {});
  });
  EXPECT_NE(two.find("built for 6 proxy channels"), std::string::npos) << two;
  fs::remove_all(dir);
}

ProfileRequest request_for(const Folder& f, const ProfileInputs& in, int repeats) {
  ProfileRequest req;
  req.model = f.spec;
  req.inputs = in;
  req.warmup = 1;
  req.repeats = repeats;
  return req;
}

TEST(LiveCosts, AgreesWithAProfileOfTheSameShape) {
  const Folder f("agree");
  const ProfileInputs in = load_profile_inputs({.model = f.model()}, {});
  ProfileRequest req = request_for(f, in, 7);
  req.tokens = {256};
  req.ops = {"prefill"};
  const auto table = make_cpu_profiler()->run(req);
  ASSERT_EQ(table.size(), 1u);
  const LiveCosts live(make_cpu_profiler(), request_for(f, in, 7));
  const double measured = live.prefill(f.spec, 256).value;
  EXPECT_EQ(measured, live.measured_rows().at(0).median_s);  // a bucket is its own median
  // Same code, same shape, same weights: the fastest repeats agree within 3x. (Fastest, not
  // median, and 3x: a test beside this one, or on a core's other hyperthread, can slow every
  // repeat of one measurement by 2x.)
  const double fastest = live.measured_rows().at(0).p10_s;
  EXPECT_GT(fastest, table[0].p10_s / 3);
  EXPECT_LT(fastest, table[0].p10_s * 3);
  const auto sources = live.sources();
  EXPECT_EQ(sources[0].op, "prefill");
  EXPECT_EQ(sources[0].measurements, 1);  // 256 is a bucket: measured once, at 256
  EXPECT_NE(sources[0].source.find("live (cpu: "), std::string::npos) << sources[0].source;
  EXPECT_NE(sources[0].source.find("real weights of " + f.model()), std::string::npos);
  EXPECT_NE(sources[1].source.find("not needed by this run"), std::string::npos);
  // Between buckets: both sides measured, the value between them.
  const double mid = live.prefill(f.spec, 384).value;
  EXPECT_EQ(live.sources()[0].measurements, 2);
  const auto rows = live.measured_rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GE(mid, std::min(rows[0].median_s, rows[1].median_s));
  EXPECT_LE(mid, std::max(rows[0].median_s, rows[1].median_s));
}

TEST(LiveCosts, PricesProxyScoringWithTheProxysOwnWeights) {
  const Folder f("proxy");
  const ProfileInputs target_only = load_profile_inputs({.model = f.model()}, {});
  auto with_proxy = [&](int layers) {
    ProfileInputs in = target_only;
    in.proxy = std::make_shared<const ModelWeights>(truncate_layers(*in.target, layers));
    in.mapper = std::make_shared<const HybridAxialMapper>(
        HybridAxialMapper::random({.in_channels = layers * f.spec.q_heads,
                                   .targets = f.spec.layers * f.spec.kv_heads,
                                   .width = 8,
                                   .layers = 1,
                                   .heads = 2,
                                   .ffn = 16,
                                   .kernel = 3,
                                   .window = 16},
                                  3));
    ProfileRequest req = request_for(f, in, 9);
    req.proxy = in.proxy->spec;
    return LiveCosts(make_cpu_profiler(), req);
  };
  const LiveCosts one = with_proxy(1), six = with_proxy(6);
  const auto p1 = truncate_layers(*target_only.target, 1).spec;
  const auto p6 = truncate_layers(*target_only.target, 6).spec;
  one.prefill(f.spec, 512);
  one.proxy_score(p1, f.spec, 512);
  six.proxy_score(p6, f.spec, 512);
  // Compared by their fastest repeats, with room for 2x: a test running beside this one (or on
  // a core's other hyperthread) can slow every repeat of one op and not the other's by 2x. Idle,
  // the ratios are about 0.27 and 0.19; scoring with the target's 8 layers would give >= 1.
  auto fastest = [](const LiveCosts& live, const std::string& op) {
    for (const OpTiming& row : live.measured_rows())
      if (row.op == op) return row.p10_s;
    ADD_FAILURE() << "no " << op << " row";
    return 0.0;
  };
  const double target = fastest(one, "prefill");
  const double small = fastest(one, "proxy_score");
  const double large = fastest(six, "proxy_score");
  EXPECT_LT(small, 0.75 * target) << "a 1-layer proxy of an 8-layer target";
  EXPECT_LT(small, 0.6 * large) << "1 proxy layer against 6";
  EXPECT_THROW(one.proxy_score(p6, f.spec, 512), std::invalid_argument);
}

TEST(LiveCosts, DecodeStepsAreMeasuredPerBatchAndContext) {
  const Folder f("decode");
  const ProfileInputs in = load_profile_inputs({.model = f.model()}, {});
  const LiveCosts live(make_cpu_profiler(), request_for(f, in, 3));
  const double b1 = live.decode_step(f.spec, 1, 1024).value;
  const double b8 = live.decode_step(f.spec, 8, 8 * 1024).value;
  EXPECT_GT(b1, 0);
  EXPECT_GT(b8, b1);  // eight requests' attention over their own caches
  const auto decode = live.sources()[1];
  EXPECT_EQ(decode.op, "decode");
  EXPECT_EQ(decode.measurements, 2);  // (1024, 1) and (1024, 8)
}

}  // namespace
}  // namespace kvshift::backend::calibrate
