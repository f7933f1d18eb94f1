// Faults injected in an agent's send path (`--faults drop=0.01,corrupt=0.001,
// delay=5ms,disconnect=0.001,stall=50ms`). Per DATA frame written, in this order:
//   disconnect=P  with probability P the connection is closed before the frame
//   stall=D       with probability stall_p (default 0.001) the sender stops for D
//   delay=D       with probability delay_p (default 0.01) the frame waits up to D more
//                 (uniform), and the frames behind it wait with it (TCP keeps order)
//   drop=P        with probability P the frame is not written (the receiver sees a gap)
//   corrupt=P     with probability P one random bit of the frame (header or payload) flips
// Draws come from a generator seeded by (seed, transfer id, connection attempt), so a run
// is reproducible however the agents' threads interleave. Leaves out: faults on the
// receiver's ACK path and in the kernel's TCP stack (loopback does not lose packets).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace kvshift::testbed {

struct FaultSpec {
  double drop = 0, corrupt = 0, disconnect = 0;
  double delay_s = 0, delay_p = 0.01;
  double stall_s = 0, stall_p = 0.001;
  std::uint64_t seed = 1;
  bool any() const {
    return drop > 0 || corrupt > 0 || disconnect > 0 || delay_s > 0 || stall_s > 0;
  }
};

/// Parses "key=value,..." (keys above plus seed=N); InputError names `flag` and the key.
FaultSpec parse_faults(const std::string& text, const std::string& flag = "--faults");

/// "drop=0.01,corrupt=0.001" back again (only the faults that are on; "none" when none).
std::string describe(const FaultSpec& f);

/// What happens to one frame.
struct FrameFate {
  bool disconnect = false;
  bool drop = false;
  bool corrupt = false;
  std::uint64_t corrupt_bit = 0;  ///< bit index into the frame, modulo its size
  double stall_s = 0;
  double delay_s = 0;
};

/// The seeded dice of one connection attempt of one transfer.
class FaultDice {
 public:
  FaultDice(const FaultSpec& spec, std::uint64_t transfer, std::uint64_t attempt);
  FrameFate next();

 private:
  bool chance(double p);
  FaultSpec spec_;
  std::mt19937_64 rng_;
};

}  // namespace kvshift::testbed
