// InputError: the one exception type for "the user gave us something wrong".
// The executable maps it to exit code 2; everything else is a runtime fault.
#pragma once

#include <stdexcept>
#include <string>

namespace kvshift {

/// Bad input from a user (flag, file, value). The message names the field.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kvshift
