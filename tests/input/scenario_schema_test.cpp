// schema.json and the loader stay in lock-step: every object the schema
// describes allows exactly the keys the loader accepts (scenario_keys.hpp),
// and every shipped scenario validates against the schema with Python's
// jsonschema (draft 2020-12) — skipped, with the reason, if it is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cost_model/move_plan.hpp"
#include "input/scenario_keys.hpp"
#include "tests/testing/run_command.hpp"

namespace kvshift::input {
namespace {

using nlohmann::json;
const std::string kDir = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios";

json schema() {
  std::ifstream in(kDir + "/schema.json");
  return json::parse(in);
}

// Every JSON pointer in the schema whose object has "properties".
void collect(const json& node, const std::string& ptr, std::set<std::string>& out) {
  if (!node.is_object()) return;
  if (node.contains("properties") && node["properties"].is_object()) out.insert(ptr);
  for (const auto& [k, v] : node.items()) {
    if (k == "properties") continue;  // property schemas with own "properties" are $refs here
    std::string token = k;
    for (std::size_t p = 0; (p = token.find('~', p)) != std::string::npos; p += 2)
      token.replace(p, 1, "~0");
    for (std::size_t p = 0; (p = token.find('/', p)) != std::string::npos; p += 2)
      token.replace(p, 1, "~1");
    if (v.is_object()) collect(v, ptr + "/" + token, out);
  }
}

TEST(ScenarioSchema, IsDraft202012AndClosed) {
  const json s = schema();
  EXPECT_EQ(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(s["additionalProperties"], false);
  for (const auto& [name, def] : s["$defs"].items()) {
    if (def.contains("properties")) {
      EXPECT_EQ(def.value("additionalProperties", true), false) << name;
    }
  }
}

TEST(ScenarioSchema, NamesEveryStrategyTheCostModelHasInItsOrder) {
  std::vector<std::string> names;
  for (cost_model::Strategy st : cost_model::kAllStrategies)
    names.emplace_back(cost_model::strategy_name(st));
  const json e =
      schema().at(json::json_pointer("/$defs/policies/properties/strategies/items/enum"));
  EXPECT_EQ(e.get<std::vector<std::string>>(), names)
      << "a strategy added to cost_model/move_plan.hpp must be added to schema.json";
}

TEST(ScenarioSchema, TheScenarioGuideDescribesEveryStrategy) {
  std::ifstream in(kDir + "/README.md");
  const std::string guide((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Its "Strategies" table: one row per strategy, opening with the table's summary; a lossy
  // strategy's row says it pays ΔNLL.
  for (const cost_model::StrategyTraits& t : cost_model::kStrategyTraits) {
    const std::string head = std::string("| `") + t.name + "` | " + t.summary;
    const auto at = guide.find(head);
    ASSERT_NE(at, std::string::npos) << "scenarios/README.md has no row \"" << head << "\"";
    const std::string row = guide.substr(at, guide.find('\n', at) - at);
    EXPECT_EQ(row.find("ΔNLL") != std::string::npos, t.lossy) << row;
  }
}

TEST(ScenarioSchema, EveryFieldHasADescription) {
  const json s = schema();
  std::set<std::string> objects;
  collect(s, "", objects);
  for (const std::string& ptr : objects) {
    for (const auto& [key, prop] : s.at(json::json_pointer(ptr))["properties"].items()) {
      EXPECT_TRUE(prop.contains("description")) << ptr << "/properties/" << key;
    }
  }
}

TEST(ScenarioSchema, AllowsExactlyTheKeysTheLoaderAccepts) {
  const json s = schema();
  std::set<std::string> described;
  collect(s, "", described);
  std::set<std::string> covered;
  for (const keys::Entry& e : keys::all_entries()) {
    const std::string ptr(e.schema_pointer);
    covered.insert(ptr);
    ASSERT_TRUE(s.contains(json::json_pointer(ptr))) << ptr;
    std::set<std::string> in_schema, in_loader;
    for (const auto& [k, v] : s.at(json::json_pointer(ptr))["properties"].items())
      in_schema.insert(k);
    for (std::string_view k : e.keys) in_loader.insert(std::string(k));
    EXPECT_EQ(in_schema, in_loader) << "schema " << (ptr.empty() ? "/" : ptr);
  }
  EXPECT_EQ(described, covered)
      << "an object in schema.json has no key list in the loader (or back)";
}

bool have_jsonschema() {
  return testing::run_command("python3 -c 'import jsonschema' >/dev/null 2>&1").exit_code == 0;
}

TEST(ScenarioSchema, ShippedScenariosValidateWithJsonschema) {
  if (!have_jsonschema())
    GTEST_SKIP() << "python3 with jsonschema not found (apt python3-jsonschema)";
  const std::string script =
      "import json,glob,sys,jsonschema\n"
      "d=sys.argv[1]\n"
      "v=jsonschema.Draft202012Validator(json.load(open(d+'/schema.json')))\n"
      "v.check_schema(v.schema)\n"
      "fs=[f for f in sorted(glob.glob(d+'/*.json')+glob.glob(d+'/regression/*.json')) "
      "if not f.endswith('schema.json')]\n"
      "bad=0\n"
      "for f in fs:\n"
      "  for e in v.iter_errors(json.load(open(f))):\n"
      "    bad+=1; print(f, '/'.join(map(str,e.absolute_path)), e.message)\n"
      "print('checked', len(fs))\n"
      "sys.exit(1 if bad or len(fs)<10 else 0)\n";
  const std::string path = std::string(KVSHIFT_BINARY_DIR) + "/schema_check.py";
  std::ofstream(path) << script;
  const auto r = testing::run_command("python3 " + path + " " + kDir);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("checked "), std::string::npos);
}

TEST(ScenarioSchema, JsonschemaRejectsWhatTheLoaderRejects) {
  if (!have_jsonschema())
    GTEST_SKIP() << "python3 with jsonschema not found (apt python3-jsonschema)";
  const std::string script =
      "import json,sys,jsonschema\n"
      "d=sys.argv[1]\n"
      "v=jsonschema.Draft202012Validator(json.load(open(d+'/schema.json')))\n"
      "q=json.load(open(d+'/quickstart.json'))\n"
      "cases=[('cluster','star','bandwith'),('workload','arrival'),('duration',)]\n"
      "q1=json.loads(json.dumps(q)); q1['cluster']['star']['bandwith']='1Gbps'\n"
      "q2=json.loads(json.dumps(q)); q2['workload']['arrival']='poison'\n"
      "q3=json.loads(json.dumps(q)); q3['duration']='60 parsecs'\n"
      "q4=json.loads(json.dumps(q)); del q4['workload']['rate']\n"
      "print(sum(1 for x in (q1,q2,q3,q4) if not v.is_valid(x)))\n";
  const std::string path = std::string(KVSHIFT_BINARY_DIR) + "/schema_reject.py";
  std::ofstream(path) << script;
  const auto r = testing::run_command("python3 " + path + " " + kDir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "4\n");
}

}  // namespace
}  // namespace kvshift::input
