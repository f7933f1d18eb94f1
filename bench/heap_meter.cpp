// Heap meter (see heap_meter.hpp): glibc's allocator, wrapped.
#include "bench/heap_meter.hpp"

#include <malloc.h>

#include <cerrno>
#include <cstring>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {

std::size_t in_use = 0;
std::size_t peak = 0;

void* counted(void* p) {
  if (p) {
    in_use += malloc_usable_size(p);
    if (in_use > peak) peak = in_use;
  }
  return p;
}

void uncount(void* p) {
  if (p) in_use -= malloc_usable_size(p);
}

}  // namespace

extern "C" {
void* malloc(std::size_t n) { return counted(__libc_malloc(n)); }
void* calloc(std::size_t n, std::size_t s) { return counted(__libc_calloc(n, s)); }
void free(void* p) {
  uncount(p);
  __libc_free(p);
}
void* realloc(void* p, std::size_t n) {
  uncount(p);
  void* q = __libc_realloc(p, n);
  if (!q && p && n) counted(p);  // failed: p is still allocated
  return counted(q);
}
void* memalign(std::size_t a, std::size_t n) { return counted(__libc_memalign(a, n)); }
void* aligned_alloc(std::size_t a, std::size_t n) { return counted(__libc_memalign(a, n)); }
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = counted(p);
  return 0;
}
}

namespace kvshift::bench {

std::size_t heap_in_use() { return in_use; }
std::size_t heap_peak() { return peak; }
void reset_heap_peak() { peak = in_use; }

}  // namespace kvshift::bench
