// SIMT stand-in for the cub calls gsrender's launchers make, with cub's semantics:
// DeviceRadixSort::SortPairs is a stable LSD radix sort on key bits [begin_bit, end_bit) (signed
// integer keys compared after flipping the sign bit, as cub's bit twiddling does; the other key
// bits are carried, not compared); DeviceScan::InclusiveSum. The two-phase protocol is kept: a
// null d_temp_storage only reports the bytes, a call with too little storage fails.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "../simt.h"

namespace cub {
namespace simt_detail {
constexpr size_t kTempBytes = 16;  // cub never asks for 0 bytes; neither do we

template <class K>
unsigned long long radix_bits(K k, int begin_bit, int end_bit) {
  static_assert(std::is_integral_v<K>, "SIMT cub: integer keys only");
  using U = std::make_unsigned_t<K>;
  U u = static_cast<U>(k);
  if constexpr (std::is_signed_v<K>) u ^= U(1) << (8 * sizeof(K) - 1);
  const int width = end_bit - begin_bit;
  const unsigned long long v = static_cast<unsigned long long>(u) >> begin_bit;
  return width >= 64 ? v : v & ((1ull << width) - 1ull);
}
}  // namespace simt_detail

struct DeviceRadixSort {
  template <class K, class V, class N>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes,
                               const K* keys_in, K* keys_out, const V* values_in, V* values_out,
                               N num_items, int begin_bit = 0, int end_bit = sizeof(K) * 8,
                               cudaStream_t = nullptr, bool = false) {
    if (!d_temp_storage) {
      temp_storage_bytes = simt_detail::kTempBytes;
      return cudaSuccess;
    }
    if (temp_storage_bytes < simt_detail::kTempBytes || begin_bit < 0 ||
        end_bit > static_cast<int>(sizeof(K) * 8) || begin_bit >= end_bit)
      return cudaErrorInvalidValue;
    const size_t n = static_cast<size_t>(num_items);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t(0));
    std::vector<unsigned long long> bits(n);
    for (size_t i = 0; i < n; ++i) bits[i] = simt_detail::radix_bits(keys_in[i], begin_bit, end_bit);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return bits[a] < bits[b]; });
    std::vector<K> k(n);
    std::vector<V> v(n);
    for (size_t i = 0; i < n; ++i) k[i] = keys_in[order[i]], v[i] = values_in[order[i]];
    std::copy(k.begin(), k.end(), keys_out);
    std::copy(v.begin(), v.end(), values_out);
    return cudaSuccess;
  }
};

struct DeviceScan {
  template <class In, class Out, class N>
  static cudaError_t InclusiveSum(void* d_temp_storage, size_t& temp_storage_bytes, In d_in,
                                  Out d_out, N num_items, cudaStream_t = nullptr) {
    if (!d_temp_storage) {
      temp_storage_bytes = simt_detail::kTempBytes;
      return cudaSuccess;
    }
    if (temp_storage_bytes < simt_detail::kTempBytes) return cudaErrorInvalidValue;
    std::remove_cv_t<std::remove_reference_t<decltype(*d_out)>> acc{};
    for (N i = 0; i < num_items; ++i) d_out[i] = acc = acc + d_in[i];
    return cudaSuccess;
  }
};

}  // namespace cub
