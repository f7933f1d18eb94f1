// Boost.MPI behind MpiWorld (see mpi_shard.hpp). Nothing MPI leaks into headers.
#include "sweep/mpi_shard.hpp"

#include <boost/mpi/collectives.hpp>
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>
#include <cstdlib>
#include <functional>

namespace kvshift::sweep {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

int rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

struct MpiWorld::Impl {
  boost::mpi::environment env{boost::mpi::threading::funneled, true};
  boost::mpi::communicator world;
};

MpiWorld::MpiWorld() {
  if (!launched_by_mpirun()) return;
  impl_ = std::make_unique<Impl>();
  rank_ = impl_->world.rank();
  size_ = impl_->world.size();
}

MpiWorld::~MpiWorld() = default;

std::vector<std::pair<std::uint64_t, std::string>> MpiWorld::gather(
    const std::vector<std::pair<std::uint64_t, std::string>>& local) const {
  if (!impl_) return local;
  std::vector<std::vector<std::pair<std::uint64_t, std::string>>> parts;
  boost::mpi::gather(impl_->world, local, parts, 0);
  std::vector<std::pair<std::uint64_t, std::string>> all;
  for (auto& part : parts) {
    for (auto& item : part) all.push_back(std::move(item));
  }
  return all;
}

std::vector<std::uint64_t> MpiWorld::broadcast(std::vector<std::uint64_t> values) const {
  if (impl_) boost::mpi::broadcast(impl_->world, values, 0);
  return values;
}

int MpiWorld::max_all(int value) const {
  if (!impl_) return value;
  int result = value;
  boost::mpi::all_reduce(impl_->world, value, result, boost::mpi::maximum<int>());
  return result;
}

}  // namespace kvshift::sweep
