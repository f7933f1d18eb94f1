// Heap meter for benchmarks: the program that links heap_meter.cpp has
// malloc/free (and so operator new/delete, in every library it loads,
// SimGrid's included) counted, so a benchmark can read the bytes in use and
// the peak since the last reset. Counts requested sizes as glibc rounds them
// (malloc_usable_size); leaves out mmap'd memory that bypasses malloc (thread
// and coroutine stacks) and allocator overhead. Single-threaded use only.
#pragma once

#include <cstddef>

namespace kvshift::bench {

/// Bytes allocated through malloc and not yet freed.
std::size_t heap_in_use();
/// Highest heap_in_use() since the last reset_heap_peak().
std::size_t heap_peak();
/// Starts a new peak window at the current usage.
void reset_heap_peak();

}  // namespace kvshift::bench
