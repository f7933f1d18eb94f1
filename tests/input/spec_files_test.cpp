#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cost_model/input_error.hpp"
#include "input/spec_files.hpp"

namespace kvshift::input {
namespace {

constexpr const char* kSmolConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "rms_norm_eps": 1e-05,
  "rope_theta": 100000, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "vocab_size": 49152})";

TEST(HfConfig, ReadsALlamaConfigLikeTheRegistry) {
  const auto m = parse_hf_config(Json::parse(kSmolConfig), "smol", "config.json");
  const auto& ref = cost_model::find_model("smollm2-135m");
  EXPECT_EQ(m.layers, ref.layers);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.kv_heads, 3);
  EXPECT_EQ(m.parameter_count(), ref.parameter_count());
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e5);
}

TEST(HfConfig, QwenGetsAttentionBias) {
  Json j = Json::parse(kSmolConfig);
  j["model_type"] = "qwen2";
  EXPECT_TRUE(parse_hf_config(j, "q", "config.json").attention_bias);
}

std::string error_of(const Json& j) {
  try {
    parse_hf_config(j, "m", "config.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kGemmaConfig = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
  "hidden_size": 640, "intermediate_size": 2048, "num_attention_heads": 4,
  "num_hidden_layers": 3, "num_key_value_heads": 1, "head_dim": 256,
  "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh",
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
  "rope_scaling": null, "sliding_window": 512, "bos_token_id": 2,
  "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
  "attn_logit_softcapping": null, "final_logit_softcapping": null, "vocab_size": 262144})";

TEST(HfConfig, ReadsGemma3sWindowsRopeBasesAndScale) {
  const auto m = parse_hf_config(Json::parse(kGemmaConfig), "g", "config.json");
  EXPECT_TRUE(m.gemma);
  EXPECT_TRUE(m.tied_embeddings);  // Gemma's default
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.sliding_window, 512);
  EXPECT_TRUE(m.is_sliding(0));
  EXPECT_FALSE(m.is_sliding(2));
  EXPECT_DOUBLE_EQ(m.rope_theta_of(1), 1e4);
  EXPECT_DOUBLE_EQ(m.rope_theta_of(2), 1e6);
  EXPECT_DOUBLE_EQ(m.query_scale, 1.0 / 16);
  EXPECT_EQ(m.bos_token, 2);
  // Embedding + 3 layers of (attention 2·640·1024 + 2·640·256, MLP 3·640·2048, norms 4·640 +
  // 2·256) + final norm.
  EXPECT_EQ(m.parameter_count(),
            262144LL * 640 +
                3 * (2LL * 640 * 1024 + 2LL * 640 * 256 + 3LL * 640 * 2048 + 4 * 640 + 2 * 256) +
                640);
}

TEST(HfConfig, Gemma3FieldsThatWouldChangeTheModelAreRequiredAndChecked) {
  Json j = Json::parse(kGemmaConfig);
  j["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_NE(error_of(j).find("layer_types must name each of the 3 layers"), std::string::npos)
      << error_of(j);
  j = Json::parse(kGemmaConfig);
  j["layer_types"][1] = "chunked_attention";
  EXPECT_NE(error_of(j).find("/layer_types: entries must be"), std::string::npos) << error_of(j);
  j = Json::parse(kGemmaConfig);
  j["final_logit_softcapping"] = 30.0;
  EXPECT_NE(error_of(j).find("/final_logit_softcapping: must be null"), std::string::npos);
  j = Json::parse(kGemmaConfig);
  j.erase("sliding_window");
  j["hidden_activation"] = "silu";
  const std::string both = error_of(j);
  EXPECT_NE(both.find("/sliding_window: is required"), std::string::npos) << both;
  EXPECT_NE(both.find("/hidden_activation: Gemma 3 uses"), std::string::npos) << both;
}

TEST(HfConfig, ScenariosRefuseASlidingWindowModelThatCalibrationReads) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvshift-gemma-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << kGemmaConfig;
  EXPECT_TRUE(resolve_model(dir.string()).gemma);
  try {
    resolve_costed_model(dir.string());
    ADD_FAILURE() << "a sliding-window model was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has sliding-window layers"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(HfConfig, MalformedConfigsNameTheField) {
  Json j = Json::parse(kSmolConfig);
  j["num_hidden_layers"] = "thirty";
  EXPECT_NE(error_of(j).find("config.json: /num_hidden_layers: expected an integer"),
            std::string::npos)
      << error_of(j);
  j = Json::parse(kSmolConfig);
  j.erase("hidden_size");
  j["num_key_value_heads"] = -3;
  const std::string both = error_of(j);
  EXPECT_NE(both.find("/hidden_size: is required"), std::string::npos) << both;
  EXPECT_NE(both.find("/num_key_value_heads: must be a positive integer"), std::string::npos);
  j = Json::parse(kSmolConfig);
  j["model_type"] = "mamba";
  EXPECT_NE(error_of(j).find("unsupported architecture"), std::string::npos);
  j = Json::parse(kSmolConfig);
  j["num_key_value_heads"] = 4;
  EXPECT_NE(error_of(j).find("multiple of num_key_value_heads"), std::string::npos);
}

TEST(JsonText, SyntaxErrorsNameTheSource) {
  try {
    parse_json_text("{\"a\": ", "x.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: not valid JSON"), std::string::npos);
  }
}

TEST(GpuSpecJson, OverridesAPreset) {
  Diagnostics d;
  const Json j =
      Json::parse(R"({"base": "h100", "hbm_bandwidth": "4TB/s", "gemm_efficiency": 0.6})");
  const auto g = parse_gpu_spec(Reader(j, "", d));
  EXPECT_TRUE(d.empty());
  EXPECT_DOUBLE_EQ(g.hbm_bandwidth.value, 32e12);
  EXPECT_DOUBLE_EQ(g.gemm_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(g.peak_dense_fp16.value, cost_model::find_gpu("h100").peak_dense_fp16.value);
}

TEST(GpuSpecJson, UnknownKeysAreErrorsWithASuggestion) {
  Diagnostics d;
  const Json j = Json::parse(R"({"base": "h100", "hbm_bandwith": "4TB/s"})");
  parse_gpu_spec(Reader(j, "", d));
  ASSERT_EQ(d.items().size(), 1u);
  EXPECT_EQ(d.items()[0],
            "/hbm_bandwith: unknown key \"hbm_bandwith\" (did you mean \"hbm_bandwidth\"?)");
}

TEST(TopologyJson, ReadsGroupsAndExplicitPlans) {
  const auto& m = cost_model::find_model("tinyllama-1.1b");
  Diagnostics d;
  const Json groups = Json::parse(R"({"omitted_groups": [2, 5]})");
  EXPECT_EQ(parse_topology(Reader(groups, "", d), m).describe(), "G2,G5");
  const Json plans = Json::parse(
      R"({"groups": [{"group": 3, "target_layers": [4, 5], "anchor_layers": [2, 3, 6, 7]}]})");
  const auto t = parse_topology(Reader(plans, "", d), m);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(t.groups()[0].anchor_layers, (std::vector<int>{2, 3, 6, 7}));
  const Json bad = Json::parse(R"({"omitted_groups": [2, "five"]})");
  parse_topology(Reader(bad, "", d), m);
  ASSERT_EQ(d.items().size(), 1u);
  EXPECT_EQ(d.items()[0], "/omitted_groups/1: expected a group number (1-based)");
}

TEST(TopologyJson, AGroupListedTwiceOrGroupsThatDisagreeAreRefused) {
  const auto& m = cost_model::find_model("tinyllama-1.1b");
  Diagnostics twice;
  parse_topology(Reader(Json::parse(R"({"omitted_groups": [4, 4]})"), "", twice), m);
  ASSERT_EQ(twice.items().size(), 1u);
  EXPECT_EQ(twice.items()[0], "/omitted_groups/1: group 4 is listed twice");
  Diagnostics disagree;
  const Json both = Json::parse(R"({"omitted_groups": [99], "groups": [{"group": 3,
      "target_layers": [4, 5], "anchor_layers": [2, 3, 6, 7]}]})");
  parse_topology(Reader(both, "", disagree), m);
  ASSERT_EQ(disagree.items().size(), 1u);
  EXPECT_EQ(disagree.items()[0],
            "/omitted_groups: lists G99 but \"groups\" describes G3; they must name the same "
            "groups");
}

TEST(TopologyJson, AnotherModelsTopologyNamesTheFieldThatDiffers) {
  const auto& m = cost_model::find_model("smollm2-135m");
  Diagnostics d;
  parse_topology(Reader(Json::parse(R"({"model": {"name": "tinyllama-1.1b", "layers": 30,
      "kv_heads": 4}, "omitted_groups": [4]})"),
                        "", d),
                 m);
  ASSERT_EQ(d.items().size(), 2u);
  EXPECT_EQ(d.items()[0],
            "/model/name: topology was made for tinyllama-1.1b, not smollm2-135m (its groups and "
            "measured ΔNLL belong to that model)");
  EXPECT_EQ(d.items()[1],
            "/model/kv_heads: topology was made for a model with kv_heads 4, not smollm2-135m's 3");
}

}  // namespace
}  // namespace kvshift::input
