// The model-input flags.
#include "apps/kvshift/support_model_inputs.hpp"

#include <CLI/CLI.hpp>

namespace kvshift::app {

void add_model_input_options(CLI::App& sub, testbed::ModelInputs& inputs,
                             const std::string& corpus_use) {
  sub.add_option("--model-dir", inputs.model_dir,
                 "Hugging Face folder with the scenario model's weights (default: the scenario's "
                 "live.model, else seeded random weights of its shape)");
  sub.add_option("--predictors", inputs.predictors,
                 "predictors.safetensors from kvshift calibrate (default: the live section's, "
                 "else seeded random predictors)");
  sub.add_option("--mapper", inputs.mapper,
                 "A trained ProxyKV mapper (mapper.safetensors beside its mapper.json): ProxyKV's "
                 "kept tokens are its scores on its proxy's prefill (default: H2O's scores of the "
                 "target's prefill)");
  sub.add_option("--corpus", inputs.corpus,
                 "Token file (little-endian int32 ids, e.g. data/corpus/kjv.tokens) the " +
                     corpus_use + " are drawn from (default: seeded random ids)");
}

}  // namespace kvshift::app
