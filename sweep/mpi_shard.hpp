// MPI sharding of a sweep. The kvshift executable links Open MPI through
// Boost.MPI, but initialises MPI only when mpirun started the process (it sets
// OMPI_COMM_WORLD_SIZE; PMI_SIZE / PMIX_RANK for other launchers), so a plain
// `kvshift sweep` never pays for or depends on an MPI singleton. Rank r runs
// the points still to run whose index among them is r mod size (points k with
// k mod size == r on a fresh sweep; on --resume the leftovers of a dead rank are
// spread over all); each writes a point's summary as it finishes, and the
// results are gathered on rank 0, which alone writes sweep.csv. Only the calling thread talks MPI
// (funneled).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kvshift::sweep {

/// True when this process was launched by mpirun (or another PMI launcher).
bool launched_by_mpirun();
/// This process's rank as the launcher's environment says (0 without one); no MPI call.
int rank_from_environment();

/// One MPI world for the duration of a sweep (a no-op world of one rank without mpirun).
class MpiWorld {
 public:
  MpiWorld();
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  /// Gathers every rank's (point, text) items on rank 0 (others get an empty list).
  std::vector<std::pair<std::uint64_t, std::string>> gather(
      const std::vector<std::pair<std::uint64_t, std::string>>& local) const;
  /// Rank 0's list of point numbers, on every rank.
  std::vector<std::uint64_t> broadcast(std::vector<std::uint64_t> values) const;
  /// The largest of every rank's `value`, on every rank.
  int max_all(int value) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace kvshift::sweep
