// The link probe behind bench/testbed_fidelity.sh (`kvshift testbed --probe`):
// the loopback ceiling (one unshaped transfer through the full transport:
// framing, CRC32C, ACKs), then transfers of given sizes through one shaped
// link, alone or with 2–8 flows contending, each measured from its start to
// its last byte verified at the receiver, beside two predictions: the cost
// model's closed form (latency + 8·bytes/B, no contention) and the simulator's
// network model (sim::Network through input::simulate_flows: max-min fair
// sharing). Leaves out: multi-hop paths (the scenario mode has them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/units.hpp"
#include "testbed/faults.hpp"

namespace kvshift::testbed {

struct ProbeCase {
  Bytes bytes;
  BitsPerSecond bandwidth;
  Seconds latency;
  int flows = 1;
};

struct ProbeRow {
  ProbeCase c;
  int repeat = 0, flow = 0;
  double measured_s = 0;
  double closed_form_s = 0;  ///< latency + 8·bytes/B
  double simulator_s = 0;    ///< the network model's finish time, contention included
  std::uint64_t frame_payload = 0;
};

/// Bits per second of one unshaped transfer of `bytes` through the transport (best of repeats).
double loopback_ceiling(Bytes bytes, int repeats);

/// Every case `repeats` times, one case at a time (its flows together).
std::vector<ProbeRow> run_probe(const std::vector<ProbeCase>& cases, int repeats,
                                const FaultSpec& faults);

/// probe.csv.
std::string probe_csv(const std::vector<ProbeRow>& rows);

}  // namespace kvshift::testbed
