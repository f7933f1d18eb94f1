// The flags that name what real moves run on (--model-dir, --predictors, --mapper,
// --corpus), declared once for `kvshift testbed` and `kvshift replay`.
#pragma once

#include <string>

#include "testbed/move_setup.hpp"

namespace CLI {
class App;
}

namespace kvshift::app {

/// Declares the four flags on `sub`, filling `inputs`; `corpus_use` says what the corpus is
/// drawn for ("contexts", "prompts").
void add_model_input_options(CLI::App& sub, testbed::ModelInputs& inputs,
                             const std::string& corpus_use);

}  // namespace kvshift::app
